"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

Not used by the product at run time: it exists so the LLM protocol (requests, malformed answers,
errors, slowness) is exercised against a real HTTP server instead of a mocked client.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class FakeOpenAI:
    """Scripted chat-completions endpoint. ``replies`` is a list of (status, body_or_content,
    delay_s) consumed in order (the last one repeats); a str body becomes the message content
    of a well-formed completion, a dict is sent as is, bytes raw. With ``answer``, every request
    is answered with ``json.dumps(answer(request_body))`` as the message content instead."""

    def __init__(self, answer: Callable[[dict], dict] | None = None):
        self.replies = [(200, "{}", 0.0)]
        self.answer = answer
        self.trickle_s: float | None = None   # send the body one byte every trickle_s seconds
        self.redirect_to: str | None = None   # answer every request with a 307 to this URL
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                fake.requests.append(body)
                if fake.redirect_to is not None:
                    self.send_response(307)
                    self.send_header("Location", fake.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if fake.answer is not None:
                    status, content, delay = 200, json.dumps(fake.answer(body)), 0.0
                else:
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
                    if fake.trickle_s:
                        for k in range(len(payload)):
                            self.wfile.write(payload[k:k + 1])
                            self.wfile.flush()
                            time.sleep(fake.trickle_s)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError, OSError):
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
