"""A stand-in for the Hugging Face Hub, for tests: a local HTTP server (``HF_ENDPOINT=fake.url``) that refuses
every request for one gated repository the way the Hub refuses a gated repo to a caller without an accepted
licence (HTTP 401, ``X-Error-Code: GatedRepo``, the Hub's message), and answers anything else with the Hub's 404
``RepoNotFound``.  ``huggingface_hub.utils.hf_raise_for_status`` turns those headers into the real
``GatedRepoError`` / ``RepositoryNotFoundError``, so the refusal reaches the code under test through the real
client stack (transformers -> huggingface_hub -> HTTP).  Test code, not library code.

It can also serve dataset repositories (``datasets={repo: {path: bytes}}``, e.g. :func:`gsm8k_files`): exactly
the requests ``datasets.load_dataset(repo, config, split=...)`` makes (logged against this server with
datasets 5.2 / huggingface_hub 2.4): the repo's info at a revision (its commit sha), the non-recursive tree of
a folder, and ``HEAD`` / ``GET`` of ``resolve/<revision>/<file>`` (a missing file: 404 ``EntryNotFound``, which
the client takes as "no such file", e.g. the absent loading script ``gsm8k.py``).

    with FakeHub("meta-llama/Llama-3.2-1B-Instruct") as hub:
        env = dict(os.environ, HF_ENDPOINT=hub.url); ...
        assert hub.asked_for_gated()
    with FakeHub(datasets={"openai/gsm8k": gsm8k_files(test_rows, train_rows)}) as hub:
        ...; assert hub.asked_for("openai/gsm8k")
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


class FakeHub:
    """The server on 127.0.0.1 at a free port (port 0), in a daemon thread; :attr:`requests` logs every
    ``(method, path)`` it was asked for; ``datasets``: the dataset repositories it serves, repo id -> files
    (path in the repo -> content), all at one commit (:data:`COMMIT`)."""

    def __init__(self, gated_repo: str | None = None, status: int = 401,
                 datasets: dict[str, dict[str, bytes]] | None = None):
        self.gated_repo, self.status, self.datasets = gated_repo, status, dict(datasets or {})
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

    def asked_for(self, repo: str) -> list[tuple[str, str]]:
        """The requests that named dataset repository ``repo`` (its API pages or its files)."""
        with self._lock:
            return [(m, p) for m, p in self.requests if f"/datasets/{repo}/" in p + "/"]

    def answer(self, path: str) -> tuple[int, dict, bytes]:
        """Status, headers and body the Hub sends for ``path``."""
        for repo, files in self.datasets.items():
            served = _dataset_answer(repo, files, path)
            if served is not None:
                return served
        if self.gated_repo and self.gated_repo in path:
            msg = (f"Access to model {self.gated_repo} is restricted. You must have access to it and be "
                   f"authenticated to access it. Please log in.")
            code, status = "GatedRepo", self.status
        else:
            msg, code, status = "Repository not found", "RepoNotFound", 404
        return _json(status, {"error": msg}, {"X-Error-Code": code, "X-Error-Message": msg})


COMMIT = "f00d" * 10  # the one commit of every served dataset repository ("main" resolves to it)


def _json(status: int, obj, headers: dict | None = None) -> tuple[int, dict, bytes]:
    body = json.dumps(obj).encode()
    return status, {**(headers or {}), "Content-Type": "application/json", "Content-Length": str(len(body))}, body


def _dataset_answer(repo: str, files: dict[str, bytes], path: str) -> tuple[int, dict, bytes] | None:
    """What the Hub answers for ``path`` about dataset ``repo``; None when ``path`` is not about it."""
    r = re.escape(repo)
    if m := re.fullmatch(rf"/datasets/{r}/resolve/[^/]+/(.+)", path):  # a file (HEAD: its metadata)
        data = files.get(m[1])
        if data is None:
            return _json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound",
                                                             "X-Repo-Commit": COMMIT})
        return 200, {"Content-Length": str(len(data)), "X-Repo-Commit": COMMIT,
                     "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}, data
    if re.fullmatch(rf"/api/datasets/{r}/revision/[^/]+", path):  # the repo's info at a revision
        return _json(200, {"id": repo, "sha": COMMIT})
    if m := re.fullmatch(rf"/api/datasets/{r}/tree/[^/]+(?:/(.+))?", path):  # a folder's entries, not recursive
        return _json(200, _tree(files, m[1] or ""))
    return None


def _tree(files: dict[str, bytes], folder: str) -> list[dict]:
    """The Hub's tree listing of ``folder`` (``""``: the root): its files and sub-folders, one level."""
    prefix = folder + "/" if folder else ""
    out, dirs = [], set()
    for f, data in sorted(files.items()):
        if not f.startswith(prefix):
            continue
        rest = f[len(prefix):]
        if "/" in rest:
            dirs.add(prefix + rest.split("/")[0])
        else:
            out.append({"type": "file", "path": f, "size": len(data), "oid": hashlib.sha1(data).hexdigest()})
    return [{"type": "directory", "path": d, "oid": COMMIT} for d in sorted(dirs)] + out


_GSM8K_CARD = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
---
A stand-in of openai/gsm8k (configuration main only) for tests.
"""


def gsm8k_files(test_rows: list[dict], train_rows: list[dict]) -> dict[str, bytes]:
    """The files of a stand-in ``openai/gsm8k`` in the real repository's layout, configuration ``main``: the
    dataset card naming the configuration's data files, one Parquet file per split (rows: ``question``,
    ``answer``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(rows):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        return buf.getvalue()

    return {"README.md": _GSM8K_CARD.encode(), "main/train-00000-of-00001.parquet": parquet(train_rows),
            "main/test-00000-of-00001.parquet": parquet(test_rows)}


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
