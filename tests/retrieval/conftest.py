"""Retrieval fixtures: a records-only library built from bench-dev's real tracks (session)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def records_library(bench_records, tmp_path_factory):
    from strived.retrieval.summaries import build_texts
    from strived.store.library import Library

    lib = Library.open(tmp_path_factory.mktemp("retrieval-lib"), create=True)
    lib.add_videos(bench_records)
    build_texts(lib)
    return lib
