"""A small persistent cache of validated LLM answers (one SQLite file).

Keyed by sha256 over (stage, model, system prompt, user prompt, schema, extra parts): the same
question to the same model gives the same answer without a network call, which is also what makes
a repeated query as fast as an offline one.
"""

from __future__ import annotations

import hashlib
import json

from ..store.answers import LLMCache  # noqa: F401  (the cache file; its SQL is the store's)


def cache_key(stage: str, model: str, system: str, user: str, schema: dict | None,
              extra: tuple | list = ()) -> str:
    """Hex sha256 of the canonical JSON of everything that determines an answer."""
    blob = json.dumps([stage, model, system, user, schema, list(extra)], sort_keys=True,
                      ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
