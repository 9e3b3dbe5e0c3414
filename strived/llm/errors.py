"""Domain errors of the LLM stages. Callers catch `LLMError` and fall back to their offline path,
showing ``str(error)`` as the notice."""

from __future__ import annotations

from ..errors import StrivedError


class LLMError(StrivedError):
    """Base class: an LLM stage could not produce a usable answer."""


class LLMUnavailable(LLMError):
    """The endpoint is not configured, unreachable, refused the request, or timed out."""

    def __init__(self, message: str, *, base_url: str | None = None, stage: str | None = None):
        self.base_url, self.stage = base_url, stage
        where = f" ({stage} at {base_url})" if base_url else (f" ({stage})" if stage else "")
        super().__init__(f"LLM unavailable{where}: {message}")


class LLMInvalidAnswer(LLMError):
    """The endpoint answered, but not with JSON valid against the stage's schema (after a retry).

    ``answer_excerpt`` is the first characters of the raw answer (untrusted: display only)."""

    def __init__(self, message: str, *, stage: str | None = None, answer_excerpt: str = ""):
        self.stage, self.answer_excerpt = stage, answer_excerpt[:300]
        st = f" ({stage})" if stage else ""
        super().__init__(f"LLM answer invalid{st}: {message}")


class LLMConfigError(LLMError):
    """The LLM settings (config file or STRIVED_LLM_* environment) are invalid."""
