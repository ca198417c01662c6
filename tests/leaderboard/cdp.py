"""A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`, to drive headless Chromium in tests.

The pipe needs no port and no extra package: Chromium reads commands on fd 3 and writes replies on fd 4, each a
JSON message ended by a NUL byte.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

# From the machine's ENVIRONMENT.md: what headless Chromium needs here, and nothing that reaches the network.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium_path() -> str | None:
    """The Chromium executable, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium() -> str:
    """The Chromium executable; a test without it fails under CI=true (`.ci/run` installs it) and skips elsewhere,
    saying why and how to install it."""
    path = chromium_path()
    if path is None:
        message = "needs headless Chromium, which is not installed (apt-get install -y chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + "; CI=true: .ci/run must install it")
        pytest.skip(message)
    return path


class CDPError(RuntimeError):
    """Chromium answered a command with an error, or did not answer in time."""


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, user_data_dir: Path, timeout: float = 30.0):
        self.timeout = timeout
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_fds() -> None:
            # Move both ends above 4 first, so that placing one cannot overwrite the other.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Runtime.enable", session=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise CDPError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise CDPError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        """Send a command and return its result; events that arrive meanwhile are kept in `events`."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """Wait for an event of this kind (or return one already received)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._read_message(deadline))

    def open(self, url: str) -> None:
        """Navigate the page and wait until it has loaded (its scripts have run)."""
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def set_viewport(self, width: int, height: int) -> None:
        """Lay the page out as a window of this size (CSS pixels, scale 1) would."""
        params = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", params, session=True)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """Write a PNG of the viewport (or of the whole page) to `path`."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            width, height = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self.send("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (of what it resolves to, for a promise)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.send("Runtime.evaluate", params, session=True)
        if "exceptionDetails" in result:
            raise CDPError(f"script error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        """Close the browser and reap it."""
        with contextlib.suppress(CDPError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


# Each CI, gap or test shown under a figure in a table cell, with where it starts and where what comes before it in
# the cell ends: a part on a line of its own starts at or below that.
_CELL_PARTS = """
[...document.querySelectorAll('td')].flatMap(td => [...td.querySelectorAll('.ci, .alt')].map(part => {
  const before = document.createRange();
  before.setStart(td, 0);
  before.setEndBefore(part);
  return [td.innerText, part.getBoundingClientRect().top, before.getBoundingClientRect().bottom];
}))
"""
# Three decimals followed at once by a digit or a letter: figures (or a figure and a label) run together as text.
RUN_TOGETHER = re.compile(r"\d\.\d{3}[0-9A-Za-z]")


def cell_parts(browser: Browser) -> list[tuple[str, float, float]]:
    """Per CI, gap or test shown under a figure in a table cell: the cell's text, the part's top and the bottom of
    what precedes it in its cell (CSS pixels)."""
    return [tuple(part) for part in browser.evaluate(_CELL_PARTS)]


def run_together(browser: Browser) -> list[str]:
    """The places in the page's rendered text (`innerText`: as laid out, a block on a line of its own) where two
    figures, or a figure and a word, run together."""
    text = browser.evaluate("document.body.innerText")
    return [text[max(0, m.start() - 20) : m.end() + 20] for m in RUN_TOGETHER.finditer(text)]


def overlapping_blocks(browser: Browser, selector: str) -> list[list[str]]:
    """Pairs of consecutive child elements (by their text) of the elements `selector` finds, where the second
    starts above the bottom of the first: blocks laid over each other instead of one under the other."""
    return browser.evaluate(
        f"[...document.querySelectorAll({selector!r})].flatMap(el => [...el.children].slice(1).map(child =>"
        " [child.previousElementSibling, child]).filter(([a, b]) => b.getBoundingClientRect().top <"
        " a.getBoundingClientRect().bottom - 0.5).map(pair => pair.map(e => e.innerText)))"
    )
