"""LLM access for every LLM stage: OpenAI-compatible endpoint, JSON-schema answers, cache,
timeouts and offline fallbacks (see docs/llm.md). Imports nothing heavy at module level."""

from .cache import LLMCache, cache_key
from .client import LLMAnswer, LLMClient, validate_answer
from .config import LLMConfig, default_cache_path, default_config_path, load_llm_config
from .errors import LLMConfigError, LLMError, LLMInvalidAnswer, LLMUnavailable
from .prompting import DATA_NOTICE, extract_last_json_object, quote_data

__all__ = ["LLMAnswer", "LLMCache", "LLMClient", "LLMConfig", "LLMConfigError", "LLMError",
           "LLMInvalidAnswer", "LLMUnavailable", "DATA_NOTICE", "cache_key", "default_cache_path",
           "default_config_path", "extract_last_json_object", "load_llm_config", "quote_data",
           "validate_answer"]
