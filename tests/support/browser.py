"""A real browser for the HTML reports: Debian's chromium, headless, driven over the DevTools protocol on a
pipe (``--remote-debugging-pipe``: commands on the child's fd 3, replies on its fd 4, each JSON message ended
by a NUL byte), with the standard library only.

``load(page, screenshot=...)`` opens a local HTML file and returns what a reviewer of the page would want to
know: every console message and log entry at error level, every request the page made besides the page
itself, the DOM as the browser built it, and the size of the screenshot it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars")
TIMEOUT_S = 60.0


class BrowserMissing(RuntimeError):
    pass


def chromium() -> str:
    """The chromium binary; ``BrowserMissing`` naming the fix when it is not installed."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        raise BrowserMissing("chromium is not installed, and the HTML report tests render every report in it: "
                             "run 'apt-get install -y chromium' (as root), or './quickstart test', which installs it")
    return path


@dataclass
class Loaded:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, error-level log entries
    requests: list[str] = field(default_factory=list)  # every URL requested besides the page itself
    dom: str = ""
    screenshot_bytes: int = 0


class _Pipe:
    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int):
        self.proc, self.w, self.r = proc, write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit code {self.proc.poll()})")
            self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        while True:
            ev = self._read_message(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev


def load(page: Path, *, screenshot: Path, width: int = 1280, height: int = 2000) -> Loaded:
    """Open ``page`` in headless chromium, wait for its load event, and write a full-page PNG (``width`` wide,
    at least ``height`` high) to ``screenshot``."""
    exe = chromium()
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="lakesweep-chromium-") as profile:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()

        def child_fds():  # the protocol's fixed descriptors: 3 for commands, 4 for replies
            a, b = os.dup(to_child_r), os.dup(from_child_w)  # above 4, so neither dup2 below clobbers the other
            os.dup2(a, 3, inheritable=True)
            os.dup2(b, 4, inheritable=True)

        proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                                 "--remote-debugging-pipe", "about:blank"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                # the descriptors preexec_fn sets up must survive into chromium
                                preexec_fn=child_fds, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        try:
            return _drive(pipe, url, screenshot, width, height)
        finally:
            try:
                pipe.call("Browser.close")
            except Exception:  # noqa: BLE001 - the browser is going away either way
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(to_child_w)
            os.close(from_child_r)


def _drive(pipe: _Pipe, url: str, screenshot: Path, width: int, height: int) -> Loaded:
    target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.call(f"{domain}.enable", session=session)
    pipe.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                     "mobile": False}, session=session)
    pipe.events.clear()
    pipe.call("Page.navigate", {"url": url}, session=session)
    pipe.wait_for("Page.loadEventFired")
    dom = pipe.call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML", "returnByValue": True},
                    session=session)["result"]["value"]
    content = pipe.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
    full = max(height, int(content["height"]) + 1)
    pipe.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": full, "deviceScaleFactor": 1,
                                                     "mobile": False}, session=session)
    shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
    import base64

    png = base64.b64decode(shot)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(png)
    loaded = Loaded(dom=dom, screenshot_bytes=len(png))
    for ev in pipe.events:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            loaded.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                        for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            loaded.errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            entry = params["entry"]
            loaded.errors.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            requested = params.get("request", {}).get("url", "")
            if requested != url:
                loaded.requests.append(requested)
    return loaded
