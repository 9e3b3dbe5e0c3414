"""A real OpenAI-compatible server on loopback (xllamacpp + the bundled Gemma 270M GGUF) for the
LLM-path tests; skipped when xllamacpp or the model packages are missing."""

import pytest


@pytest.fixture(scope="session")
def rulelib_llm_server(tmp_path_factory):
    from strived.llm.errors import LLMUnavailable
    from strived.llm.local_server import local_llm_server
    try:
        ctx = local_llm_server(cache_dir=tmp_path_factory.mktemp("gguf"), n_ctx=4096)
        srv = ctx.__enter__()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    yield srv
    ctx.__exit__(None, None, None)
