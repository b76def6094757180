"""The dashboard as a newcomer first sees it (issue 25), against a live `setpoint up`: a
real engine running real children (`live_stack.yaml`: a Job, a probed Process, a
Deployment of two Python HTTP servers and their Service), and a real headless Chromium
that checks certificates as a user's browser does. Nothing sleeps: Playwright's `expect`
waits for what the page shows.

Screenshots of the overview, the graph and the timeline are written under the test's
folder, and to docs/images/ when SETPOINT_DOCS_SCREENSHOT=1.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dashboard_kit import ROOT, TIMEOUT_S, LiveUp, browser, chromium, live_up
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

pytestmark = pytest.mark.xdist_group("live-up")
"""One worker runs these in order, against one `setpoint up` (the crash-loop test, which
leaves its failure in the timeline, comes after the healthy start's)."""

OWN = [
    ("Job", "prepare"),
    ("Process", "cache"),
    ("Deployment", "web"),
    ("Service", "web"),
]
"""The stack's objects with a Ready condition (and the two replicas): Ready 6 when up."""
SECRET_VALUE = "hush-hush-0451"
SYSTEM = ("Event", "CustomResourceDefinition", "ControllerRevision", "Lease", "Namespace")


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveUp]:
    chromium()
    running = live_up(Path(tmp_path_factory.mktemp("live")))
    try:
        yield running
    finally:
        running.stop()


def fresh_link(up: LiveUp) -> str:
    """A new one-time login link, as `setpoint dashboard --print` prints it."""
    link = up.setpoint("dashboard", "--print").strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui/#login=[A-Za-z0-9_-]+", link), link
    return link


def logged_in(page: Any, link: str) -> None:
    """Open a login link and wait until the overview has drawn, logged in."""
    page.goto(link)
    expect(page.locator("#main[data-ready=true]")).to_have_count(1)
    expect(page.locator("#login")).to_be_hidden()


def converged(page: Any) -> None:
    """Wait until the whole stack is Ready: its 6 objects (and both replicas)."""
    expect(page.locator('#counts [data-state="ready"]')).to_have_text(
        "Ready 6", timeout=TIMEOUT_S * 1000
    )


def session(up: LiveUp) -> tuple[str, dict[str, str]]:
    """The page listener's address and the headers of a session token (a fresh code)."""
    page_url, code = fresh_link(up).split("/ui/#login=")
    answer = httpx.post(f"{page_url}/ui/login", json={"code": code}, timeout=TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    return page_url, {"Authorization": f"Bearer {answer.json()['token']}"}


def timeline_shows_all_ready(up: LiveUp) -> None:
    """Wait until the recorded timeline (written by the engine's recorder, a little after
    the objects) has each of the stack's six objects turning Ready."""
    page_url, headers = session(up)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        entries = httpx.get(
            f"{page_url}/apis/insight.setpoint.dev/v1alpha1/timeline",
            headers=headers,
            timeout=TIMEOUT_S,
        ).json()["items"]
        ready = {
            (e["object"]["kind"], e["object"]["name"])
            for e in entries
            if e.get("health") == "ready"
        }
        if len(ready) >= 6:
            return
        assert time.monotonic() < deadline, f"only these turned Ready: {sorted(ready)}"
        time.sleep(0.2)  # a condition with a deadline: the recorder's own pace


def shot(page: Any, directory: Path, name: str) -> None:
    path = directory / name
    page.screenshot(path=str(path))
    if os.environ.get("SETPOINT_DOCS_SCREENSHOT") == "1":
        shutil.copyfile(path, ROOT / "docs/images" / name)


# -- one step in --------------------------------------------------------------------------


def test_the_printed_link_logs_in_with_no_certificate_warning(up: LiveUp, tmp_path: Path) -> None:
    with browser(tmp_path, any_certificate=False) as context:
        # this browser checks certificates: the self-signed HTTPS port is refused
        checked = context.new_page()
        with pytest.raises(PlaywrightError, match="ERR_CERT"):
            checked.goto(f"{up.api}/ui/")
        checked.close()
        page = context.new_page()
        logged_in(page, up.link)
        assert page.evaluate("location.hash") == ""  # the code left the address bar
        badge = page.locator("#live")
        expect(badge).to_have_text("live")
        expect(badge).to_have_class(re.compile(r"\bstatus-live\b"))
    # the code worked once: another browser with the same link gets the login form
    with browser(tmp_path / "second", any_certificate=False) as context:
        page = context.new_page()
        page.goto(up.link)
        expect(page.locator("#login-error")).to_contain_text("not valid")
        expect(page.locator("#live")).to_have_text("offline")
        expect(page.locator("#live")).not_to_have_class(re.compile(r"\bstatus-live\b"))


def test_setpoint_dashboard_opens_the_users_browser(up: LiveUp, tmp_path: Path) -> None:
    opened = tmp_path / "opened"
    script = tmp_path / "browser.sh"
    script.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    script.chmod(stat.S_IRWXU)
    said = up.setpoint("dashboard", env={"BROWSER": str(script)})
    assert said.strip() == "opened the dashboard in your browser"
    link = opened.read_text()
    assert "#login=" in link
    with browser(tmp_path, any_certificate=False) as context:
        logged_in(context.new_page(), link)


def test_the_page_listener_refuses_other_hosts_origins_and_used_codes(up: LiveUp) -> None:
    link = fresh_link(up)
    page_url, code = link.split("/ui/#login=")
    with httpx.Client(base_url=page_url, timeout=TIMEOUT_S) as client:
        rebound = client.get("/ui/", headers={"Host": "evil.example"})  # DNS rebinding
        assert rebound.status_code == 403
        foreign = client.post(
            "/ui/login", json={"code": code}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        form = {"Content-Type": "application/x-www-form-urlencoded"}  # needs no preflight
        as_form = client.post("/ui/login", content=f"code={code}", headers=form)
        assert as_form.status_code == 415
        first = client.post("/ui/login", json={"code": code})
        assert first.status_code == 200, first.text
        assert first.headers["cache-control"] == "no-store"
        token = first.json()["token"]
        again = client.post("/ui/login", json={"code": code})
        assert again.status_code == 401
        assert "not valid" in again.json()["message"]
        # the session token reads the API over the page's listener, as the page does
        headers = {"Authorization": f"Bearer {token}"}
        objects = client.get("/apis/insight.setpoint.dev/v1alpha1/objects", headers=headers)
        assert objects.status_code == 200
        assert client.get("/apis/insight.setpoint.dev/v1alpha1/objects").status_code == 401
    # the code is in no log the run writes
    logs = "".join(up.output) + "".join(
        p.read_text(errors="replace") for p in (up.directory / ".setpoint").rglob("*.log")
    )
    assert code not in logs


# -- their objects first, failures are failures -------------------------------------------


def test_overview_opens_on_their_objects_with_counts_by_state(up: LiveUp, tmp_path: Path) -> None:
    with browser(tmp_path, any_certificate=False) as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1300, "height": 520})
        logged_in(page, fresh_link(up))
        converged(page)
        for kind, name in OWN:
            row = page.locator(f"#objects .row[data-kind={kind}][data-name={name}]")
            expect(row.locator(".state")).to_have_text("Ready")
        replicas = page.locator("#objects .row[data-kind=Process][data-name^=web-]")
        expect(replicas).to_have_count(2)
        for kind in SYSTEM:
            expect(page.locator(f"#objects .row[data-kind={kind}]")).to_have_count(0)
        expect(page.locator('#counts [data-state="failed"]')).to_have_text("failed 0")
        expect(page.locator('#counts [data-state="progressing"]')).to_have_text("progressing 0")
        expect(page.locator("#objects")).not_to_contain_text("None")
        secret = page.locator("#objects .row[data-kind=Secret][data-name=web-config]")
        expect(secret.locator(".state")).to_have_text("-")  # no Ready condition
        shot(page, tmp_path, "overview.png")
        page.check("#filter-system")  # the server's kinds, behind a filter
        events = page.locator("#objects .row[data-kind=Event]")
        expect(events.first).to_be_visible()
        expect(events.first.locator(".state")).to_have_text("-")
        expect(page.locator("#objects")).not_to_contain_text("None")
        # a Secret by name: its page shows its keys, never its values
        page.goto(page.url.split("#")[0] + "#/object/Secret/default/web-config")
        expect(page.locator("#spec")).to_contain_text("greeting")
        expect(page.locator("#spec")).to_contain_text("***")
        content = page.content()
        assert SECRET_VALUE not in content
        assert base64.b64encode(SECRET_VALUE.encode()).decode() not in content


def test_graph_links_the_service_to_its_replicas(up: LiveUp, tmp_path: Path) -> None:
    with browser(tmp_path, any_certificate=False) as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1100, "height": 360})
        logged_in(page, fresh_link(up))
        converged(page)
        page.goto(page.url.split("#")[0] + "#/graph")
        endpoints = page.locator('#graph-svg path[data-type="endpoint"]')
        expect(endpoints).to_have_count(2)
        for i in range(2):
            assert endpoints.nth(i).get_attribute("data-from") == "Service/default/web"
            assert (endpoints.nth(i).get_attribute("data-to") or "").startswith(
                "Process/default/web-"
            )
        expect(page.locator('#graph-svg a[data-state="ready"]')).to_have_count(6)
        expect(page.locator('#graph-svg a[data-state="failed"]')).to_have_count(0)
        shot(page, tmp_path, "graph.png")


def test_a_healthy_start_shows_progress_and_no_failure(up: LiveUp, tmp_path: Path) -> None:
    with browser(tmp_path, any_certificate=False) as context:
        page = context.new_page()
        page.set_viewport_size({"width": 1520, "height": 460})
        logged_in(page, fresh_link(up))
        converged(page)
        timeline_shows_all_ready(up)
        page.goto(page.url.split("#")[0] + "#/timeline")
        turned_ready = page.locator('#timeline-svg circle[data-health="ready"]')
        expect(turned_ready.first).to_be_attached()
        assert turned_ready.count() >= 6
        # waiting for a dependency and a pending probe are progress: yellow, not failures
        progress = page.locator('#timeline-svg circle[data-health="progressing"]')
        expect(progress.first).to_be_attached()
        expect(page.locator("#failures li")).to_have_count(0)
        expect(page.locator("#timeline-svg circle.failure")).to_have_count(0)
        shot(page, tmp_path, "timeline.png")
    # the CLI says the same: the Job's message agrees with its reason
    assert not any("not run yet" in line for line in up.output)


def test_a_crash_loop_is_a_failure_everywhere(up: LiveUp, tmp_path: Path) -> None:
    crash = tmp_path / "crash.yaml"
    crash.write_text(
        "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: crasher}\n"
        "spec:\n  args: [python3, -c, 'raise SystemExit(3)']\n"
    )
    up.setpoint("apply", "-f", str(crash))
    try:
        with browser(tmp_path, any_certificate=False) as context:
            page = context.new_page()
            logged_in(page, fresh_link(up))
            row = page.locator("#objects .row[data-kind=Process][data-name=crasher]")
            expect(row.locator(".state")).to_have_text("failed", timeout=TIMEOUT_S * 1000)
            expect(page.locator('#counts [data-state="failed"]')).to_have_text("failed 1")
            page.goto(page.url.split("#")[0] + "#/timeline")
            failures = page.locator('#failures button[data-object="Process/default/crasher"]')
            expect(failures.first).to_be_visible()
            others = page.locator("#failures button:not([data-object='Process/default/crasher'])")
            expect(others).to_have_count(0)
    finally:
        up.setpoint("delete", "process", "crasher")


def test_setpoint_dashboard_with_no_server_says_so_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    done = subprocess.run(
        [sys.executable, "-m", "setpoint", "dashboard", "--print"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "no server runs on" in done.stderr
    assert "setpoint up" in done.stderr


def test_up_detached_writes_no_login_code_to_its_log(tmp_path: Path) -> None:
    """`up -d`'s engine prints to its log file: no code there; `setpoint dashboard` gets
    a link from it, which logs in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    env.pop("BROWSER", None)
    manifest = tmp_path / "sleeper.yaml"
    manifest.write_text(
        "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: sleeper}\n"
        "spec: {args: [sleep, '1000']}\n"
    )

    def setpoint(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "setpoint", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    setpoint("up", "-d", str(manifest))
    try:
        link = setpoint("dashboard", "--print").strip()
        assert "#login=" in link
        log = (tmp_path / ".setpoint/engine.log").read_text()
        assert "dashboard: `setpoint dashboard` opens it" in log
        assert "#login=" not in log
        with browser(tmp_path, any_certificate=False) as context:
            page = context.new_page()
            logged_in(page, link)
            row = page.locator("#objects .row[data-kind=Process][data-name=sleeper]")
            expect(row).to_have_count(1)
    finally:
        setpoint("down")
