"""LLM endpoint settings: defaults → config file → ``STRIVED_LLM_*`` environment, validated once.

The API key is never read from or written to the config file and never logged: it comes from
``STRIVED_LLM_API_KEY`` or ``OPENAI_API_KEY``, else from the system keyring (service ``strived``,
user ``llm``) when the optional ``keyring`` module is installed. Local servers (llama.cpp, vLLM,
Ollama, xllamacpp) accept any key; a placeholder is sent when none is set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .errors import LLMConfigError

KEYRING_SERVICE = "strived"
KEYRING_USER = "llm"
JSON_MODES = ("auto", "json_schema", "json_object", "none")
_PLACEHOLDER_KEY = "not-needed"


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$STRIVED_LLM_CONFIG``, else ``$STRIVED_CONFIG_DIR/llm.toml``, else
    ``$XDG_CONFIG_HOME/strived/llm.toml`` (``~/.config/strived/llm.toml``)."""
    env = os.environ if environ is None else environ
    if env.get("STRIVED_LLM_CONFIG"):
        return Path(env["STRIVED_LLM_CONFIG"]).expanduser()
    if env.get("STRIVED_CONFIG_DIR"):
        return Path(env["STRIVED_CONFIG_DIR"]).expanduser() / "llm.toml"
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "strived" / "llm.toml"


def default_cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$STRIVED_CACHE/llm_cache.sqlite``, else ``$XDG_CACHE_HOME/strived/llm_cache.sqlite``."""
    env = os.environ if environ is None else environ
    if env.get("STRIVED_CACHE"):
        return Path(env["STRIVED_CACHE"]).expanduser() / "llm_cache.sqlite"
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strived" / "llm_cache.sqlite"


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call an OpenAI-compatible chat endpoint.

    ``enabled`` is False unless a ``base_url`` (or an explicit ``enabled = true`` with a hosted
    default) is configured: the product is offline by default. ``timeout_s`` bounds one request.
    ``json_mode``: ``auto`` tries ``response_format`` json_schema and falls back to plain text
    with JSON extraction when the server rejects it.
    """

    base_url: str | None = None
    model: str = "default"
    timeout_s: float = 30.0
    enabled: bool = False
    json_mode: str = "auto"
    max_tokens: int = 512
    temperature: float = 0.0
    cache_path: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.json_mode not in JSON_MODES:
            raise LLMConfigError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {self.json_mode!r}")
        if not (self.timeout_s > 0):
            raise LLMConfigError(f"timeout_s must be > 0, not {self.timeout_s!r}")
        if self.max_tokens <= 0:
            raise LLMConfigError(f"max_tokens must be > 0, not {self.max_tokens!r}")
        if self.base_url is not None and not str(self.base_url).startswith(("http://", "https://")):
            raise LLMConfigError(f"base_url must start with http:// or https://, not {self.base_url!r}")

    @property
    def usable(self) -> bool:
        return self.enabled and bool(self.base_url)

    def key(self) -> str:
        """The API key to send (a placeholder for keyless local servers). Never log it."""
        return self.api_key or _PLACEHOLDER_KEY

    def describe(self) -> str:
        """A loggable one-liner (no key)."""
        state = "enabled" if self.usable else "disabled"
        key = "set" if self.api_key else "none"
        return f"LLM {state}: base_url={self.base_url} model={self.model} timeout_s={self.timeout_s} key={key}"


_FIELDS = {f.name: f.type for f in dataclasses.fields(LLMConfig) if f.name != "api_key"}


def _coerce(name: str, value, origin: str):
    kind = _FIELDS[name]
    try:
        if "bool" in str(kind):
            if isinstance(value, str):
                low = value.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off", ""):
                    return False
                raise ValueError(value)
            return bool(value)
        if "float" in str(kind):
            return float(value)
        if "int" in str(kind):
            return int(value)
        return None if value in (None, "") else str(value)
    except (TypeError, ValueError):
        raise LLMConfigError(f"{origin}: {name} has an invalid value {value!r}") from None


def _read_file(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise LLMConfigError(f"cannot read LLM config {path}: {e}") from None
    try:
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise LLMConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {e}") from None
    if isinstance(data.get("llm"), dict):
        data = data["llm"]
    if "api_key" in data:
        raise LLMConfigError(f"{path}: api_key must not be stored in a file; set STRIVED_LLM_API_KEY "
                             "or store it in the system keyring (service 'strived', user 'llm')")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise LLMConfigError(f"{path}: unknown LLM setting(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(sorted(_FIELDS))}")
    return {k: _coerce(k, v, str(path)) for k, v in data.items()}


def _key_from_keyring() -> str | None:
    try:
        import keyring  # optional
    except ImportError:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
    except Exception:  # a broken keyring backend must not stop the app
        return None


def load_llm_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None,
                    use_keyring: bool = True, **overrides) -> LLMConfig:
    """Build the config: defaults, then the file (``path`` or `default_config_path`), then the
    ``STRIVED_LLM_<FIELD>`` environment variables, then keyword ``overrides``.

    Raises LLMConfigError for an invalid file or value.
    """
    env = os.environ if environ is None else environ
    values: dict = {}
    values.update(_read_file(Path(path) if path else default_config_path(env)))
    for name in _FIELDS:
        var = f"STRIVED_LLM_{name.upper()}"
        if var in env:
            values[name] = _coerce(name, env[var], var)
    values.update({k: v for k, v in overrides.items() if k != "api_key"})
    if "enabled" not in values:
        values["enabled"] = bool(values.get("base_url"))
    key = overrides.get("api_key") or env.get("STRIVED_LLM_API_KEY") or env.get("OPENAI_API_KEY")
    if not key and use_keyring:
        key = _key_from_keyring()
    return LLMConfig(api_key=key or None, **values)
