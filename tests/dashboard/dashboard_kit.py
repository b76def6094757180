"""Helpers of the dashboard tests: a real `setpoint serve` (HTTPS, tokens of each role) on
a free port with manifests applied first, an API client for each role, and a real headless
Chromium driven by Playwright. Chromium or Playwright missing: the test is skipped with
the reason, and fails when CI=true. Nothing here sleeps: callers wait on what the page
shows (Playwright's `expect`) or on the server's output line.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from setpoint.insight.timeline import Timeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [ROOT / "examples/webapp/webapp.yaml", ROOT / "examples/thermostat/thermostat.yaml"]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_S = 60.0
"""The longest any one wait may take before the test fails (never waited out)."""
TOKENS = {
    "admin": "admin-token-0123456789",
    "edit": "edit-token-0123456789",
    "view": "view-token-0123456789",
}
API = "/apis/setpoint.dev/v1alpha1/namespaces/default"


def missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def chromium() -> str:
    """Chromium's path; skip without it (fail when CI=true)."""
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if found is None:
        missing("chromium is not installed (apt-get install -y chromium; ./dev test does as root)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing("playwright is not installed (it is in the dev group: ./dev run pytest)")
    assert found is not None
    return found


@dataclass
class Served:
    directory: Path
    store: str
    url: str
    proc: subprocess.Popen[str]
    link: str = ""
    """The one-step login link `serve` printed."""

    def client(self, role: str = "admin") -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKENS[role]}"}
        return httpx.Client(base_url=self.url, headers=headers, verify=False, timeout=TIMEOUT_S)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def setpoint(store: str, *args: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    done = subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", store, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr


def serve(directory: Path, manifests: list[Path] = EXAMPLES) -> Served:
    """`setpoint serve --port 0` on a SQLite store in `directory` with `manifests` applied;
    returns once it says where it serves and its dashboard link."""
    directory.mkdir(parents=True, exist_ok=True)
    tokens = directory / "tokens.csv"
    tokens.write_text("".join(f"{token},{role},{role}\n" for role, token in TOKENS.items()))
    store = f"sqlite:///{directory / 'state.db'}"
    for manifest in manifests:
        setpoint(store, "apply", "-f", str(manifest), cwd=directory)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    command = [sys.executable, "-m", "setpoint", "--store", store, "serve", "--port", "0"]
    proc = subprocess.Popen(
        [*command, "--token-file", str(tokens)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=directory,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    url = ""
    while True:
        try:
            line = lines.get(timeout=TIMEOUT_S)
        except queue.Empty:
            proc.kill()
            raise AssertionError("setpoint serve did not say where it serves") from None
        if line is None:
            raise AssertionError(f"setpoint serve ended with {proc.wait()}")
        if "serving the API on" in line:
            url = line.split("serving the API on ", 1)[1].split()[0]
        if line.startswith("dashboard: "):
            return Served(directory, store, url, proc, line.split()[1])


@contextmanager
def browser(directory: Path, *, any_certificate: bool = True) -> Iterator[Any]:
    """A fresh headless Chromium (its own user-data-dir under `directory`) that accepts the
    server's self-signed certificate (unless `any_certificate` is False: then it checks
    certificates as a user's browser does); yields its context."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(directory / "chromium-profile"),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            ignore_https_errors=any_certificate,
            viewport={"width": 1400, "height": 900},
        )
        context.set_default_timeout(TIMEOUT_S * 1000)
        try:
            yield context
        finally:
            context.close()


def log_in(page: Any, served: Served, role: str = "admin", path: str = "") -> None:
    """Open the dashboard, log in with `role`'s token, go to `path` (a fragment) and wait
    until that page has drawn."""
    from playwright.sync_api import expect

    page.goto(f"{served.url}/ui/")
    page.fill("#token", TOKENS[role])
    page.click("#login button[type=submit]")
    expect(page.locator("#main[data-ready=true]")).to_have_count(1)
    if path:
        page.evaluate("document.getElementById('main').dataset.ready = ''")
        page.goto(f"{served.url}/ui/{path}")
        expect(page.locator("#main[data-ready=true]")).to_have_count(1)


def status_patch(
    client: httpx.Client, plural: str, name: str, conditions: list[dict[str, Any]]
) -> None:
    """Write `conditions` into an object's status through the API's status subresource."""
    response = client.patch(
        f"{API}/{plural}/{name}/status",
        json={"status": {"conditions": conditions}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 200, response.text


def condition(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


MARKUP_USER = '<img src=x onerror="document.title=1">alice'
"""A user name that is markup: the dashboard shows it as text."""


def record_failure(database: Path) -> None:
    """A timeline as `setpoint up` records it: `api` depends on `cache`, both run; then
    kubectl changes cache's args (the injected cause), cache exits and crash-loops, api
    stops being Ready. Each write is in the audit trail (`MARKUP_USER` made the change)."""
    t = time.time() - 60

    def ref(name: str) -> dict[str, str]:
        return {"kind": "Process", "name": name, "namespace": "default"}

    def became(ts: float, name: str, status: str, reason: str) -> dict[str, object]:
        cond = {"type": "Ready", "status": status, "reason": reason, "message": ""}
        return {"ts": ts, "type": "condition", "object": ref(name), "condition": cond}

    def change(ts: float, name: str, action: str, old: object, new: object) -> dict[str, object]:
        diff = {"spec.args": [old, new]}
        entry = {"ts": ts, "type": "change", "object": ref(name), "action": action}
        return entry | {"actor": "kubectl", "diff": diff}

    entries = [
        change(t, "cache", "created", None, ["sleep", "1000"]),
        change(t, "api", "created", None, ["sleep", "1000"]),
        {"ts": t + 0.1, "type": "edge", "from": ref("api"), "to": ref("cache")}
        | {"relation": "dependsOn"},
        became(t + 1, "cache", "True", "Running"),
        became(t + 2, "api", "True", "Running"),
        change(t + 30, "cache", "updated", ["sleep", "1000"], ["cache-server", "--port", "bad"]),
        {"ts": t + 30, "type": "write", "object": ref("cache"), "verb": "patch", "revision": 9}
        | {"user": MARKUP_USER, "manager": "kubectl-patch", "agent": "kubectl/v1.31.0"},
        {"ts": t + 31.5, "type": "write", "object": ref("cache"), "verb": "update_status"}
        | {"revision": 10, "user": None, "manager": None, "agent": None},
        {"ts": t + 31, "type": "exit", "object": ref("cache"), "exitCode": 2, "signal": None}
        | {"reason": "Error", "finishedAt": None, "stoppedOnRequest": False},
        became(t + 31.5, "cache", "False", "CrashLoopBackOff"),
        became(t + 32, "api", "False", "DependencyNotReady"),
    ]
    with Timeline.open(database) as timeline:
        timeline.append_many(entries)


@dataclass
class LiveUp:
    """A real `setpoint up` of a manifest: its engine runs the children; `api` is the
    HTTPS API's address, `link` the one-step login link it printed."""

    directory: Path
    api: str
    link: str
    proc: subprocess.Popen[str]
    output: list[str]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # as Ctrl-C: the children are stopped
        try:
            self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def setpoint(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run `setpoint ARGS` where `up` runs (its store found in `.setpoint/`); its
        standard output."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
        environ.pop("BROWSER", None)
        done = subprocess.run(
            [sys.executable, "-m", "setpoint", *args],
            cwd=self.directory,
            env={**environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LIVE_STACK = ROOT / "tests/dashboard/live_stack.yaml"


def live_up(directory: Path) -> LiveUp:
    """`setpoint up` of `LIVE_STACK` (a Job, a Process, a Deployment of two Python HTTP
    servers and their Service, on free ports) in `directory`; returns once it printed its
    login link (the objects converge after)."""
    directory.mkdir(parents=True, exist_ok=True)
    base = free_port()
    ports = {"CACHE_PORT": free_port(), "SERVICE_PORT": free_port()}
    ports |= {"WEB_START": base, "WEB_END": base + 40}
    text = LIVE_STACK.read_text()
    for name, port in ports.items():
        text = text.replace(f"${{{name}}}", str(port))
    (directory / "stack.yaml").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "up", "stack.yaml"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=directory,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    api = None
    while True:
        try:
            line = lines.get(timeout=TIMEOUT_S)
        except queue.Empty:
            proc.kill()
            raise AssertionError("setpoint up printed no dashboard link") from None
        if line is None:
            raise AssertionError(f"setpoint up ended with {proc.wait()}: {''.join(output)}")
        if line.startswith("serving the API on "):
            api = line.split("serving the API on ", 1)[1].split()[0]
        if line.startswith("dashboard: "):
            assert api is not None
            link = line.split()[1]
            return LiveUp(directory, api, link, proc, output)
