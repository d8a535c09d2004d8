"""A stand-in for the Hugging Face Hub, for tests: a local HTTP server (``HF_ENDPOINT=fake.url``) that refuses
every request for one gated repository the way the Hub refuses a gated repo to a caller without an accepted
licence (HTTP 401, ``X-Error-Code: GatedRepo``, the Hub's message), and answers anything else with the Hub's 404
``RepoNotFound``.  ``huggingface_hub.utils.hf_raise_for_status`` turns those headers into the real
``GatedRepoError`` / ``RepositoryNotFoundError``, so the refusal reaches the code under test through the real
client stack (transformers -> huggingface_hub -> HTTP).  Test code, not library code.

    with FakeHub("meta-llama/Llama-3.2-1B-Instruct") as hub:
        env = dict(os.environ, HF_ENDPOINT=hub.url); ...
        assert hub.asked_for_gated()
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


class FakeHub:
    """The server on 127.0.0.1 at a free port (port 0), in a daemon thread; :attr:`requests` logs every
    ``(method, path)`` it was asked for."""

    def __init__(self, gated_repo: str, status: int = 401):
        self.gated_repo, self.status = gated_repo, status
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeHub":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def log(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def asked_for_gated(self) -> list[tuple[str, str]]:
        """The requests that named the gated repository (its files or its API page)."""
        with self._lock:
            return [(m, p) for m, p in self.requests if self.gated_repo in p]

    def answer(self, path: str) -> tuple[int, dict, bytes]:
        """Status, headers and body the Hub sends for ``path``."""
        if self.gated_repo in path:
            msg = (f"Access to model {self.gated_repo} is restricted. You must have access to it and be "
                   f"authenticated to access it. Please log in.")
            code, status = "GatedRepo", self.status
        else:
            msg, code, status = "Repository not found", "RepoNotFound", 404
        body = json.dumps({"error": msg}).encode()
        return status, {"X-Error-Code": code, "X-Error-Message": msg, "Content-Type": "application/json",
                        "Content-Length": str(len(body))}, body


def _handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, with_body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.log(self.command, path)
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)  # a POST's body (unread, it would break the kept-alive connection)
            status, headers, body = hub.answer(path)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (http.server's names)
            self._reply(True)

        def do_POST(self):  # noqa: N802
            self._reply(True)

        def do_HEAD(self):  # noqa: N802
            self._reply(False)

        def log_message(self, *args):  # quiet: the test reads hub.requests instead
            pass

    return Handler
