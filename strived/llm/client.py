"""`LLMClient`: one JSON-answer call to any OpenAI-compatible chat endpoint, validated and cached.

Every LLM stage (fusion router, event extractor, rule proposer, matcher, adapter) goes through
`LLMClient.complete_json`. The answer is untrusted data: it is parsed as JSON, validated against
the stage's JSON Schema (and an optional semantic ``check``), never executed and never used as a
path. Failures raise `LLMUnavailable` / `LLMInvalidAnswer`; the caller falls back to its offline
path and shows the error text as a notice.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .cache import LLMCache, cache_key
from .config import LLMConfig, default_cache_path
from .errors import LLMInvalidAnswer, LLMUnavailable
from .prompting import extract_last_json_object

CheckFn = Callable[[dict], None]  # raises ValueError with a message when the answer is unusable


@dataclass
class LLMAnswer:
    """A validated answer: ``data`` (the JSON object), whether it came from the cache, the wall
    time spent (0 for a cache hit), and the model name it was asked of."""

    data: dict
    from_cache: bool
    elapsed_s: float
    model: str


def _schema_strict(schema: dict) -> bool:
    props = schema.get("properties", {})
    return (schema.get("type") == "object" and schema.get("additionalProperties") is False
            and set(schema.get("required", [])) == set(props))


def validate_answer(data, schema: dict, check: CheckFn | None = None) -> str | None:
    """Return None when ``data`` is valid, else a short message naming the first problems."""
    import jsonschema

    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for e in errors[:3]:
            ptr = "/" + "/".join(str(p) for p in e.absolute_path)
            parts.append(f"{ptr}: {e.message[:160]}")
        return "; ".join(parts)
    if check is not None:
        try:
            check(data)
        except ValueError as e:
            return str(e)[:300]
    return None


_WARNED: set = set()


def warn_plain_http_key(config: LLMConfig) -> bool:
    """Warn (once per URL, on stderr) before an API key goes to a plain-http endpoint that is not
    on this machine: anyone on the path can read it. Returns whether it warned."""
    import sys
    from urllib.parse import urlsplit

    u = urlsplit(config.base_url or "")
    host = (u.hostname or "").lower()
    loop = host in ("localhost", "::1") or host.startswith("127.")
    if u.scheme != "http" or loop or not config.api_key or config.base_url in _WARNED:
        return False
    _WARNED.add(config.base_url)
    print(f"strived: warning: the LLM API key is sent unencrypted to {u.scheme}://{host} (plain http "
          "to another machine); use https, or an endpoint on this machine", file=sys.stderr)
    return True


class LLMClient:
    """Calls ``config.base_url`` through the ``openai`` client.

    ``cache``: an `LLMCache`, a file path, True (the user cache file from
    `default_cache_path`, or ``config.cache_path``) or None/False (memory only).
    ``n_requests`` counts HTTP requests actually sent; ``n_cache_hits`` answers served from cache.
    """

    def __init__(self, config: LLMConfig, cache: LLMCache | str | Path | bool | None = True):
        self.config = config
        if isinstance(cache, LLMCache):
            self.cache = cache
        elif cache is True:
            self.cache = LLMCache(config.cache_path or default_cache_path())
        elif cache in (None, False):
            self.cache = LLMCache(None)
        else:
            self.cache = LLMCache(cache)
        self._json_mode = config.json_mode
        self._client = None
        self._lock = threading.Lock()
        self.n_requests = 0
        self.n_cache_hits = 0

    @property
    def model(self) -> str:
        return self.config.model

    def _openai(self):
        if self._client is None:
            try:
                import openai
            except ImportError:
                raise LLMUnavailable("the 'openai' package is not installed") from None
            warn_plain_http_key(self.config)
            # never follow a redirect: the prompt and the key stay on the configured origin
            http = openai.DefaultHttpxClient(follow_redirects=False, timeout=self.config.timeout_s)
            self._client = openai.OpenAI(base_url=self.config.base_url, api_key=self.config.key(),
                                         timeout=self.config.timeout_s, max_retries=0, http_client=http)
        return self._client

    def _create_within(self, client, deadline_s: float, **kwargs):
        """``chat.completions.create`` with a deadline on the whole answer: the HTTP timeouts are
        per read, so an endpoint that trickles a byte a second would hold a search forever. Past
        the deadline the connection is closed and LLMUnavailable raised."""
        box: dict = {}

        def call():
            try:
                box["resp"] = client.chat.completions.create(**kwargs)
            except BaseException as e:     # handed to the caller's thread
                box["error"] = e
        t = threading.Thread(target=call, daemon=True, name="llm-request")
        t.start()
        t.join(deadline_s)
        if t.is_alive():
            with self._lock:
                self._client = None       # a fresh client next time; this one is closed now
            try:
                client.close()
            except Exception:             # closing a client another thread is reading from
                pass
            raise TimeoutError
        if "error" in box:
            raise box["error"]
        return box["resp"]

    # ------------------------------------------------------------------ public
    def complete_json(self, system: str, user: str, schema: dict, *, stage: str = "generic",
                      cache_key_parts: tuple | list = (), timeout_s: float | None = None,
                      check: CheckFn | None = None, max_tokens: int | None = None,
                      use_cache: bool = True, images: Sequence[bytes] = ()) -> dict:
        """Ask for one JSON object valid against ``schema``; return it.

        ``stage`` names the calling stage (cache partition and error messages);
        ``cache_key_parts`` adds anything else the answer depends on (e.g. a library version).
        Raises LLMUnavailable (not configured, unreachable, timeout, HTTP error) or
        LLMInvalidAnswer (no valid JSON after one retry).
        """
        return self.complete_json_ex(system, user, schema, stage=stage,
                                     cache_key_parts=cache_key_parts, timeout_s=timeout_s,
                                     check=check, max_tokens=max_tokens, use_cache=use_cache,
                                     images=images).data

    def complete_json_ex(self, system: str, user: str, schema: dict, *, stage: str = "generic",
                         cache_key_parts: tuple | list = (), timeout_s: float | None = None,
                         check: CheckFn | None = None, max_tokens: int | None = None,
                         use_cache: bool = True, images: Sequence[bytes] = ()) -> LLMAnswer:
        """Like `complete_json`, returning an `LLMAnswer` (data + whether it came from cache).
        ``images``: JPEG bytes sent with the user message (OpenAI image_url data URLs), for a
        vision-language model; they are part of the cache key."""
        import hashlib

        img_keys = tuple(hashlib.sha1(b).hexdigest() for b in images)
        key = cache_key(stage, self.config.model, system, user, schema, tuple(cache_key_parts) + img_keys)
        if use_cache:
            hit = self.cache.get(key)
            if hit is not None and validate_answer(hit, schema, check) is None:
                self.n_cache_hits += 1
                return LLMAnswer(hit, True, 0.0, self.config.model)
            if hit is not None:
                self.cache.delete(key)  # cached under older, looser rules: never serve it again
        if not self.config.usable:
            raise LLMUnavailable("no LLM endpoint configured (set STRIVED_LLM_BASE_URL or the "
                                 "config file)", stage=stage)
        t0 = time.perf_counter()
        user_content: str | list = user
        if images:
            import base64

            user_content = [{"type": "text", "text": user}] + [
                {"type": "image_url",
                 "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(b).decode("ascii")}}
                for b in images]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user_content}]
        problem, raw = None, ""
        for attempt in range(2):
            raw = self._chat(messages, schema, stage, timeout_s, max_tokens)
            data = self._parse(raw)
            problem = "no JSON object in the answer" if data is None else validate_answer(data, schema, check)
            if problem is None:
                if use_cache:
                    self.cache.put(key, stage, self.config.model, data)
                return LLMAnswer(data, False, time.perf_counter() - t0, self.config.model)
            # One retry, telling the model what was wrong (its answer is echoed as its own turn).
            messages = messages[:2] + [
                {"role": "assistant", "content": raw[:2000]},
                {"role": "user", "content": f"That answer is invalid ({problem}). Reply again with "
                                            "only one JSON object that satisfies the schema."}]
        raise LLMInvalidAnswer(problem or "invalid", stage=stage, answer_excerpt=raw)

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _parse(raw: str):
        """The answer's JSON object, or None. An answer nested too deeply to read, or holding text
        that is not valid Unicode (a lone surrogate), is no answer: the stage falls back."""
        try:
            obj = LLMClient._parse_any(raw)
            if obj is not None:
                json.dumps(obj, ensure_ascii=False).encode("utf-8")   # raises on lone surrogates
            return obj
        except (RecursionError, UnicodeError):
            return None

    @staticmethod
    def _parse_any(raw: str):
        text = raw.strip()
        if text.startswith("```"):
            text = text.strip("`")
            text = text[text.find("{"):] if "{" in text else text
        try:
            obj = json.loads(text)
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
        return extract_last_json_object(raw)

    def _chat(self, messages, schema, stage, timeout_s, max_tokens) -> str:
        import openai

        client = self._openai()
        mode = self._json_mode
        kwargs = dict(model=self.config.model, temperature=self.config.temperature,
                      max_tokens=max_tokens or self.config.max_tokens,
                      timeout=timeout_s or self.config.timeout_s)
        msgs = messages
        if mode in ("auto", "json_schema"):
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": stage.replace(".", "_")[:60] or "answer", "schema": schema,
                "strict": _schema_strict(schema)}}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        if mode in ("none", "json_object"):
            msgs = [dict(messages[0], content=messages[0]["content"] + "\n\nAnswer with one JSON "
                         "object valid against this JSON Schema:\n" + json.dumps(schema))] + messages[1:]
        base = self.config.base_url
        try:
            self.n_requests += 1
            resp = self._create_within(client, float(kwargs["timeout"]) + 1.0, messages=msgs, **kwargs)
        except TimeoutError:
            raise LLMUnavailable(f"no complete answer within {kwargs['timeout']:.0f} s (the endpoint "
                                 "answers too slowly)", base_url=base, stage=stage) from None
        except openai.APITimeoutError:
            raise LLMUnavailable(f"no answer within {kwargs['timeout']:.0f} s", base_url=base,
                                 stage=stage) from None
        except openai.APIConnectionError as e:
            raise LLMUnavailable(f"cannot connect ({type(e).__name__})", base_url=base,
                                 stage=stage) from None
        except openai.AuthenticationError:
            raise LLMUnavailable("authentication failed: check STRIVED_LLM_API_KEY", base_url=base,
                                 stage=stage) from None
        except (openai.BadRequestError, openai.UnprocessableEntityError) as e:
            if mode == "auto" and "response_format" in kwargs:
                # The server does not do structured output: ask in plain text from now on.
                with self._lock:
                    self._json_mode = "none"
                return self._chat(messages, schema, stage, timeout_s, max_tokens)
            raise LLMUnavailable(f"request rejected (HTTP {e.status_code})", base_url=base,
                                 stage=stage) from None
        except openai.APIStatusError as e:
            if 300 <= e.status_code < 400:
                raise LLMUnavailable(f"HTTP {e.status_code}: the endpoint redirects elsewhere; not followed "
                                     "(the prompt and key stay on the configured address)", base_url=base,
                                     stage=stage) from None
            raise LLMUnavailable(f"HTTP {e.status_code}", base_url=base, stage=stage) from None
        except openai.OpenAIError as e:
            raise LLMUnavailable(f"{type(e).__name__}", base_url=base, stage=stage) from None
        except (ValueError, TypeError, KeyError) as e:
            # A proxy or a broken server sent a body that is not an OpenAI response.
            raise LLMUnavailable(f"malformed HTTP response ({type(e).__name__})", base_url=base,
                                 stage=stage) from None
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise LLMInvalidAnswer("the response has no message content", stage=stage)
        return content
