"""A headless Chromium driven over the Chrome DevTools Protocol: opens a report page, runs script in it, and
takes full-page screenshots (``homie report --screenshot``; the browser tests).

Why this and not playwright or selenium: Debian's ``chromium`` package is the browser, and talking to it needs
only its DevTools WebSocket (documented at https://chromedevtools.github.io/devtools-protocol/) and the
``websockets`` client; playwright pins its own browser builds (downloaded at install time) and selenium needs a
matching chromedriver. Four commands are used: ``Page.navigate``, ``Runtime.evaluate``,
``Page.getLayoutMetrics`` and ``Page.captureScreenshot``; ``Network`` events record every URL the page asked for.

The browser runs with a fresh profile, no sandbox (containers have no user namespaces), no GPU, and Chromium's
own background traffic turned off (component updates, sync, QUIC, first-run fetches).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

#: The Debian package's binary, then other common names.
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)


class BrowserError(RuntimeError):
    """The browser could not be started or a DevTools command failed; the message says which."""


def find_browser() -> str | None:
    """The path of a Chromium binary, or None."""
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_missing() -> str | None:
    """Why a page cannot be opened here (None when it can): the reason a browser test skips with."""
    if find_browser() is None:
        return "no Chromium binary on PATH (Debian: apt-get install chromium; scripts/setup.sh test does)"
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return "the websockets package is missing (the 'browser' extra: pip install -e '.[browser]')"
    return None


@dataclass
class Browser:
    """One headless Chromium with one page. Use as a context manager; :meth:`close` ends the process."""

    width: int = 1400
    height: int = 1000
    timeout_s: float = 30.0
    requested_urls: list[str] = field(default_factory=list)
    _process: subprocess.Popen[bytes] | None = None
    _profile: str | None = None
    _socket: Any = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _next_id: int = 0

    def __enter__(self) -> Browser:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        binary = find_browser()
        if binary is None:
            raise BrowserError("no Chromium binary on PATH")
        from websockets.sync.client import connect

        self._profile = tempfile.mkdtemp(prefix="homie-chromium-")
        args = [binary, *HEADLESS_FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
                f"--window-size={self.width},{self.height}", "about:blank"]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError(f"{binary} did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout_s) as answer:
            targets = json.loads(answer.read())
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            self.close()
            raise BrowserError("the browser opened no page")
        # websockets wants its sync connection closed through a context: the stack closes it in close().
        self._socket = self._stack.enter_context(
            connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=self.timeout_s)
        )
        self.command("Page.enable")
        self.command("Network.enable")
        self.command("Emulation.setDeviceMetricsOverride",
                     width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)

    def close(self) -> None:
        if self._socket is not None:
            self._stack.close()
            self._socket = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def _receive(self) -> dict[str, Any]:
        message = json.loads(self._socket.recv(timeout=self.timeout_s))
        if message.get("method") == "Network.requestWillBeSent":
            self.requested_urls.append(message["params"]["request"]["url"])
        return message

    def command(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events that arrive meanwhile are noted)."""
        if self._socket is None:
            raise BrowserError("the browser is not started")
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str) -> None:
        """Navigate and wait for the load event (every image decoded or failed)."""
        result = self.command("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self.wait_for_load()

    def wait_for_load(self) -> None:
        """Wait for the next load event (after a navigation, or a click on a link)."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self._receive().get("method") == "Page.loadEventFired":
                return
        raise BrowserError(f"the page did not finish loading in {self.timeout_s:.0f} s")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises awaited)."""
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}: {expression[:80]}")
        return result["result"].get("value")

    def screenshot(self, max_height: int = 16000) -> bytes:
        """A PNG of the whole page (up to ``max_height`` CSS pixels tall)."""
        size = self.command("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": max(self.width, int(size["width"])),
                "height": min(int(size["height"]), max_height), "scale": 1}
        data = self.command("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        return base64.b64decode(data)


def screenshot_page(page: Path, out: Path, width: int = 1400) -> Path:
    """Open ``page`` headlessly and write a full-page PNG to ``out``."""
    with Browser(width=width) as browser:
        browser.open(page.absolute().as_uri())
        png = browser.screenshot()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return out
