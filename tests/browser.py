"""Headless Chromium for tests, driven over the W3C WebDriver protocol (chromedriver's HTTP API).

Debian's ``chromium`` and ``chromium-driver`` (installed by ``scripts/setup.sh``) are all it needs:
the protocol is a handful of JSON requests, so no client library is added for it. ``Browser.skip_reason()``
says why a test cannot run (no browser installed); tests skip with it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Browser:
    """One headless Chromium session: open a URL, run JavaScript, read the console, take screenshots."""

    def __init__(self, width: int = 1200, height: int = 1600):
        self.binary = next((shutil.which(b) for b in CHROMIUM if shutil.which(b)), None)
        driver = shutil.which(DRIVER) or ("/usr/lib/chromium/chromedriver"
                                          if os.path.exists("/usr/lib/chromium/chromedriver") else None)
        if not self.binary or not driver:
            raise WebDriverError(self.skip_reason())
        self.port = _free_port()
        # Chromium leaves its singleton folders (org.chromium.Chromium.*) in TMPDIR: one of our own,
        # removed in close()
        self.tmp = tempfile.mkdtemp(prefix="curate-browser-")
        self.proc = subprocess.Popen([driver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "TMPDIR": self.tmp})
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.time() > deadline:
                self.proc.kill()
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"browserName": "chrome", "goog:loggingPrefs": {"browser": "ALL"},
                "goog:chromeOptions": {"binary": self.binary, "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={width},{height}", "--hide-scrollbars", "--no-first-run"]}}
        try:
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]
        except Exception:
            self.proc.kill()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    @staticmethod
    def skip_reason() -> str | None:
        if not any(shutil.which(b) for b in CHROMIUM):
            return "chromium is not installed (scripts/setup.sh installs Debian's chromium and chromium-driver)"
        if not shutil.which(DRIVER) and not os.path.exists("/usr/lib/chromium/chromedriver"):
            return "chromedriver is not installed (Debian package chromium-driver, from scripts/setup.sh)"
        return None

    def _call(self, method: str, path: str, body: dict | None = None, timeout: float = 60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise WebDriverError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None

    def _s(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._s("POST", "/url", {"url": url})

    def on_new_document(self, script: str) -> None:
        """Run ``script`` in every page opened after this, before the page's own scripts (to record
        what a page looks like at its load event: ``open`` returns only after it). Chromedriver's
        Chrome DevTools passthrough, since WebDriver itself has no such command."""
        self._s("POST", "/goog/cdp/execute", {"cmd": "Page.addScriptToEvaluateOnNewDocument",
                                              "params": {"source": script}})

    def js(self, script: str, *args):
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def text(self) -> str:
        """The page's visible text, including Bokeh's, which lives in shadow roots (not in innerText)."""
        return self.js("""
            const out = [];
            const walk = (node) => {
              if (node.nodeType === Node.TEXT_NODE) { if (node.textContent.trim()) out.push(node.textContent.trim()); return; }
              if (node.nodeName === 'SCRIPT' || node.nodeName === 'STYLE') return;
              if (node.shadowRoot) walk(node.shadowRoot);
              for (const child of node.childNodes) walk(child);
            };
            walk(document.body);
            return out.join('\\n');""")

    def count(self, selector: str) -> int:
        """Elements matching ``selector`` anywhere, shadow roots included (Bokeh draws in them)."""
        return self.js("""
            const sel = arguments[0];
            const walk = (root) => [...root.querySelectorAll('*')].reduce(
              (n, el) => n + (el.shadowRoot ? walk(el.shadowRoot) : 0), root.querySelectorAll(sel).length);
            return walk(document);""", selector)

    def errors(self) -> list[str]:
        """Console errors (level SEVERE) since the last call to console() or errors()."""
        return [e["message"] for e in self.console() if e.get("level") == "SEVERE"]

    def wait_for(self, script: str, timeout: float = 30, *args):
        """Poll ``script`` until it returns something truthy; return it."""
        deadline = time.time() + timeout
        while True:
            value = self.js(script, *args)
            if value:
                return value
            if time.time() > deadline:
                raise TimeoutError(f"waited {timeout}s for: {script}")
            time.sleep(0.2)

    def console(self) -> list[dict]:
        """Console entries since the last call (level, message): chromedriver's log endpoint."""
        return self._s("POST", "/se/log", {"type": "browser"}) or []

    def screenshot(self, path) -> bytes:
        png = base64.b64decode(self._s("GET", "/screenshot"))
        with open(path, "wb") as f:
            f.write(png)
        return png

    def close(self) -> None:
        try:
            self._s("DELETE", "")
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)  # a test file, not the project: a left folder is harmless

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
