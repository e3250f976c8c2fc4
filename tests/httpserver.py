"""A small HTTP file server on 127.0.0.1 for download tests: Range requests and fault injection.

    with FileServer(root) as server:
        server.fail("data/a.warc.gz", "500", "500")      # the next two requests get HTTP 500
        server.fail("data/b.warc.gz", "cut")             # the next one stops after half the body
        download(server.url("data/a.warc.gz"), ...)
        server.requests                                   # [(path, Range header or None, status)]

Faults, consumed one per request for that path: an HTTP status ("500", "503", "429", "404"),
``"cut"`` (headers promise the full length, half the body is sent, the connection closes),
``"stall"`` (no answer for ``stall_seconds``), ``"ignore-range"`` (200 and the whole file even
when a Range was asked), ``"endless"`` (no Content-Length, the file sent again and again until the
client hangs up or ``ENDLESS_CAP`` bytes went out; ``server.sent[path]`` counts them),
``"cut-at:N"`` (headers promise the rest of the file, the body stops just before byte N of the
file, the connection closes: a cut at an exact place, say inside a gzip member or a record),
``"trickle"`` (the answer goes out ``trickle_bytes`` at a time, one piece every 0.1 s, until the
client hangs up), ``"short-length"`` (a Content-Length of half the answer, then the whole answer:
a client that trusts it stops half way and sees nothing wrong), ``"restart"`` (a Range request is
answered 206 with the right Content-Range and length, but with the file's bytes from byte 0). ``delay`` slows every answer down (to observe concurrency). Every answer carries
an ``ETag`` (the file's size and mtime), so a client can tell a changed file.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
#: most bytes an "endless" answer sends
ENDLESS_CAP = 256 << 20


class FileServer:
    def __init__(self, root, delay: float = 0.0, stall_seconds: float = 2.0, trickle_bytes: int = 1):
        self.root = Path(root).resolve()
        self.delay = delay
        self.stall_seconds = stall_seconds
        self.trickle_bytes = trickle_bytes
        self.requests: list[tuple[str, str | None, int]] = []
        self.faults: dict[str, deque] = defaultdict(deque)
        self.sent: dict[str, int] = defaultdict(int)
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None

    # ------------------------------------------------------------------ control

    def fail(self, path: str, *faults: str) -> None:
        self.faults[path.lstrip("/")].extend(faults)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def hits(self, path: str) -> list[tuple[str, str | None, int]]:
        return [r for r in self.requests if r[0] == path.lstrip("/")]

    def start(self) -> FileServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: FileServer

    def log_message(self, *args):  # quiet
        pass

    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def _serve(self, body: bool):
        srv = self.owner
        rel = unquote(urlparse(self.path).path).lstrip("/")
        with srv._lock:
            srv.active += 1
            srv.max_active = max(srv.max_active, srv.active)
            queue = srv.faults.get(rel)
            fault = queue.popleft() if queue else None
        self._rel = rel
        try:
            if srv.delay:
                time.sleep(srv.delay)
            self._answer(srv, rel, fault, body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with srv._lock:
                srv.active -= 1

    def _head(self, code: int, headers: dict) -> None:
        # logged before the answer leaves, so a client that got it always finds it in .requests
        with self.owner._lock:
            self.owner.requests.append((self._rel, self.headers.get("Range"), code))
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _answer(self, srv: FileServer, rel: str, fault: str | None, body: bool) -> None:
        if fault == "stall":
            with srv._lock:
                srv.requests.append((rel, self.headers.get("Range"), -1))
            time.sleep(srv.stall_seconds)
            self.close_connection = True
            return
        if fault and fault.isdigit():
            code = int(fault)
            self._head(code, {"Retry-After": "0", "Content-Length": "0"} if code in (429, 503)
                       else {"Content-Length": "0"})
            return
        path = (srv.root / rel).resolve()
        if path.is_dir():
            path = path / "index.html"
        if srv.root not in path.parents or not path.is_file():
            self._head(404, {"Content-Length": "0"})
            return
        data = path.read_bytes()
        size = len(data)
        if fault == "endless":
            self._head(200, {"Content-Type": "application/octet-stream", "Connection": "close"})
            self.close_connection = True
            while srv.sent[rel] < ENDLESS_CAP:  # a BrokenPipeError (the client hung up) ends it
                self.wfile.write(data)
                srv.sent[rel] += len(data)
            return
        start, end, code = 0, size - 1, 200
        m = _RANGE.match(self.headers.get("Range", "") or "")
        if m and fault != "ignore-range":
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if start >= size:
                self._head(416, {"Content-Range": f"bytes */{size}", "Content-Length": "0"})
                return
            code = 206
        chunk = data[start:end + 1]
        if fault == "restart":
            chunk = data[:len(chunk)]
        st = path.stat()
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(chunk)),
                   "Accept-Ranges": "bytes", "ETag": f'"{st.st_size:x}-{st.st_mtime_ns:x}"'}
        if fault == "short-length":
            headers["Content-Length"] = str(len(chunk) // 2)
            self.close_connection = True
        if code == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._head(code, headers)
        if body:
            if fault == "cut" or (fault or "").startswith("cut-at:"):
                stop = len(chunk) // 2 if fault == "cut" else max(0, int(fault[len("cut-at:"):]) - start)
                self.wfile.write(chunk[:stop])
                self.wfile.flush()
                self.close_connection = True
                return
            if fault == "trickle":
                self.close_connection = True
                for i in range(0, len(chunk), srv.trickle_bytes):
                    self.wfile.write(chunk[i:i + srv.trickle_bytes])
                    self.wfile.flush()
                    time.sleep(0.1)
                return
            self.wfile.write(chunk)
