"""The dashboard end to end: a real `setpoint serve`, a real headless Chromium, and the
page checked by what it shows (Playwright's `expect` waits for it; nothing sleeps)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from dashboard_kit import (
    API,
    MARKUP_USER,
    ROOT,
    TOKENS,
    Served,
    browser,
    condition,
    log_in,
    record_failure,
    serve,
    status_patch,
)
from playwright.sync_api import expect

from setpoint.insight.health import RULES, health


def test_overview_lists_the_examples(served: Served, tmp_path: Path) -> None:
    with browser(tmp_path) as context:
        page = context.new_page()
        log_in(page, served)
        for kind, name in [
            ("Job", "db-init"),
            ("Process", "db"),
            ("Job", "migrate"),
            ("Deployment", "web"),
            ("Service", "web"),
            ("Thermostat", "living-room"),
        ]:
            expect(
                page.locator(f"#objects .row[data-kind={kind}][data-name={name}]")
            ).to_have_count(1)
        page.select_option("#filter-kind", "Job")
        expect(page.locator("#objects .row")).to_have_count(2)
        page.select_option("#filter-kind", "")
        page.fill("#filter-text", "living")
        expect(page.locator("#objects .row")).to_have_count(1)
        page.fill("#filter-text", "")
        page.fill("#filter-selector", "app=db")
        page.press("#filter-selector", "Enter")  # the label selector goes to the server
        expect(page.locator("#objects .row")).to_have_count(1)
        expect(page.locator("#objects .row[data-name=db]")).to_have_count(1)
        page.screenshot(path=str(tmp_path / "overview.png"))


def test_object_page_shows_conditions_events_and_changes_live(
    served: Served, tmp_path: Path
) -> None:
    with served.client() as api:
        status_patch(
            api, "processes", "db", [condition("Ready", "False", "Starting", "probe failing")]
        )
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "db.started", "namespace": "default"},
            "involvedObject": {"apiVersion": "setpoint.dev/v1alpha1", "kind": "Process"}
            | {"name": "db", "namespace": "default"},
            "reason": "ProbeFailed",
            "message": "readiness probe failed: connection refused",
            "type": "Warning",
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "source": {"component": "test"},
        }
        assert api.post("/api/v1/namespaces/default/events", json=event).status_code == 201
        with browser(tmp_path) as context:
            page = context.new_page()
            log_in(page, served, path="#/object/Process/default/db")
            expect(page.locator("#conditions tr[data-type=Ready]")).to_contain_text("Starting")
            expect(page.locator("#events")).to_contain_text("ProbeFailed")
            expect(page.locator("#spec")).to_contain_text("pg.py")
            expect(page.locator("#object-state")).to_have_text("progressing")
            page.evaluate("window.notReloaded = true")
            status_patch(api, "processes", "db", [condition("Ready", "True", "Running")])
            expect(page.locator("#object-state")).to_have_text("Ready", timeout=10_000)
            expect(page.locator("#conditions tr[data-type=Ready]")).to_contain_text("Running")
            assert page.evaluate("window.notReloaded") is True  # arrived on the watch
            page.screenshot(path=str(tmp_path / "object.png"))


def test_graph_shows_the_webapp_chain(served: Served, tmp_path: Path) -> None:
    with browser(tmp_path) as context:
        page = context.new_page()
        log_in(page, served, path="#/graph")
        for dependent, dependency in [
            ("Deployment/default/web", "Job/default/migrate"),
            ("Deployment/default/web", "Process/default/db"),
            ("Job/default/migrate", "Process/default/db"),
            ("Process/default/db", "Job/default/db-init"),
        ]:
            edge = f'#graph-svg path[data-from="{dependent}"][data-to="{dependency}"]'
            expect(page.locator(edge)).to_have_count(1)
        from_db_init = page.locator('#graph-svg path[data-from="Job/default/db-init"]')
        expect(from_db_init).to_have_count(0)  # it depends on nothing
        migrate = page.locator('#graph-svg a[data-key="Job/default/migrate"]')
        with served.client() as api:
            stalled = condition("Stalled", "True", "BackoffLimitExceeded", "3 failures")
            status_patch(api, "jobs", "migrate", [stalled])
        expect(migrate).to_have_attribute("data-state", "failed")  # redrawn from the watch
        page.screenshot(path=str(tmp_path / "graph.png"))
        page.click('#graph-svg a[data-key="Job/default/migrate"]')
        expect(page.locator("#object-title")).to_have_text("Job/migrate")


def test_timeline_explain_ranks_the_injected_cause_first(tmp_path: Path) -> None:
    manifest = tmp_path / "failing.yaml"
    manifest.write_text(
        "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: cache}\n"
        "spec: {args: [cache-server, --port, bad]}\n---\n"
        "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: api}\n"
        "spec:\n  args: [sleep, '1000']\n"
        "  dependsOn: [{kind: Process, name: cache, condition: Ready}]\n"
    )
    served = serve(tmp_path / "server", [manifest])
    try:
        record_failure(Path(served.store.split(":///", 1)[1]))
        with served.client() as api:
            failing = condition("Ready", "False", "CrashLoopBackOff", "exited with code 2")
            status_patch(api, "processes", "cache", [failing])
            waiting = condition("Ready", "False", "DependencyNotReady", "Process/cache")
            status_patch(api, "processes", "api", [waiting])
        with browser(tmp_path) as context:
            page = context.new_page()
            log_in(page, served, path="#/timeline")
            # api waits for cache: progress, not a failure; cache's crash loop is one
            waiting_api = page.locator('#failures button[data-object="Process/default/api"]')
            failure = page.locator('#failures button[data-object="Process/default/cache"]')
            expect(failure.first).to_be_visible()
            expect(waiting_api).to_have_count(0)
            failure.first.click()
            first = page.locator("#causes li").first
            expect(first).to_contain_text("Process/cache spec.args changed")
            expect(page.locator("#timeline-svg circle.evidence").first).to_be_visible()
            writes = page.locator("#audit li")
            # The recorded writes, and those made through `serve` since (no engine ran: the
            # server caught the timeline up from the store): each once.
            expect(writes).to_have_count(6)  # newest first
            expect(writes.nth(4).locator(".user")).to_have_text("unnamed writer")
            expect(writes.nth(5).locator(".user")).to_have_text(MARKUP_USER)
            expect(writes.nth(5)).to_contain_text("patch Process/cache rev 9 (kubectl-patch)")
            for name in ("cache", "api"):
                created = writes.filter(has_text=f"create Process/{name} ")
                expect(created).to_have_count(1)
                expect(created).to_contain_text("(setpoint)")
                patched = writes.filter(has_text=f"update_status Process/{name} ")
                expect(patched.filter(has_text="admin")).to_have_count(1)
            assert page.locator("#audit img").count() == 0
            page.screenshot(path=str(tmp_path / "timeline.png"))
            page.goto(f"{served.url}/ui/#/object/Process/default/api")
            expect(page.locator("#root-blocker")).to_contain_text("Process/cache")
            expect(page.locator("#top-cause")).to_contain_text("spec.args changed")
            page.screenshot(path=str(tmp_path / "why.png"))
    finally:
        served.stop()


def test_view_role_sees_no_actions_and_cannot_write(served: Served, tmp_path: Path) -> None:
    with browser(tmp_path) as context:
        page = context.new_page()
        log_in(page, served, role="admin", path="#/object/Deployment/default/web")
        expect(page.locator("#action-delete")).to_be_visible()
        expect(page.locator("#action-scale")).to_be_visible()
        expect(page.locator("#action-undo")).to_be_visible()
        page.screenshot(path=str(tmp_path / "admin.png"))
        page.on("dialog", lambda dialog: dialog.accept())  # the confirmation
        page.fill("#scale-replicas", "2")
        page.click("#action-scale")
        expect(page.locator("#action-message")).to_have_text("Scale to 2: done")
        expect(page.locator("#spec")).to_contain_text("replicas: 2")  # back on the watch
    with served.client() as api:
        assert api.get(f"{API}/deployments/web").json()["spec"]["replicas"] == 2
    with browser(tmp_path / "view") as context:
        page = context.new_page()
        log_in(page, served, role="view", path="#/object/Deployment/default/web")
        expect(page.locator("#spec")).to_contain_text("replicas")
        expect(page.locator("#actions")).to_be_hidden()
        expect(page.locator("#actions button")).to_have_count(0)
        refused = page.evaluate(
            """async ([path, token]) => (await fetch(path, {method: "DELETE",
                headers: {Authorization: `Bearer ${token}`}})).status""",
            [f"{API}/deployments/web", TOKENS["view"]],
        )
        assert refused == 403
        page.screenshot(path=str(tmp_path / "view.png"))
    with served.client("view") as api:
        assert api.get(f"{API}/deployments/web").status_code == 200


def test_assets_carry_a_strict_policy_and_data_needs_a_token(served: Served) -> None:
    with served.client() as api:
        page = api.get("/ui/")
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)  # no inline script
        assert " style=" not in page.text
        for name in ["app.js", "api.js", "style.css"]:
            asset = api.get(f"/ui/{name}")
            assert asset.status_code == 200
            assert asset.headers["content-security-policy"]
        anonymous = api.get(
            "/apis/insight.setpoint.dev/v1alpha1/objects", headers={"Authorization": ""}
        )
        assert anonymous.status_code == 401
    for source in (ROOT / "src/setpoint/api/ui").iterdir():
        text = source.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text  # everything ships in the package: no CDN


def test_log_tail_follows_and_control_view_plots(served: Served, tmp_path: Path) -> None:
    from setpoint.engine import workspace_of
    from setpoint.model.wellknown import child_log_file

    log = workspace_of(served.store).log_dir / child_log_file("default", "db")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("database system is starting up\n")
    with browser(tmp_path) as context:
        page = context.new_page()
        log_in(page, served, path="#/object/Process/default/db")
        expect(page.locator("#log")).to_contain_text("starting up")
        with log.open("a") as f:
            f.write("database system is ready to accept connections\n")
        expect(page.locator("#log")).to_contain_text("ready to accept connections")
        page.screenshot(path=str(tmp_path / "log.png"))
        page.goto(f"{served.url}/ui/#/object/Thermostat/default/living-room")
        expect(page.locator("#control-svg")).to_have_count(1)
        with served.client() as api:
            for temperature, output in [(15.0, 80.0), (17.5, 60.0), (19.0, 30.0)]:
                response = api.patch(
                    f"{API}/thermostats/living-room/status",
                    json={"status": {"temperature": temperature, "output": output}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert response.status_code == 200, response.text
                expect(page.locator("#control-svg polyline")).to_have_count(3)
        page.screenshot(path=str(tmp_path / "control.png"))


def test_readme_screenshot_of_the_webapp(tmp_path: Path) -> None:
    """The README's picture: examples/webapp converging (db ready, migrate running, web
    waiting for it), the graph with the hover on web naming its root blocker. Written to
    docs/images/dashboard.png when SETPOINT_DOCS_SCREENSHOT=1, else only under tmp_path."""
    served = serve(tmp_path / "server", [ROOT / "examples/webapp/webapp.yaml"])
    try:
        with served.client() as api:
            done = condition("Complete", "True", "Completed", "initdb finished")
            status_patch(api, "jobs", "db-init", [done, condition("Ready", "True", "Completed")])
            status_patch(api, "processes", "db", [condition("Ready", "True", "Running")])
            running = condition("Ready", "False", "Running", "applying 0002_orders.sql")
            status_patch(api, "jobs", "migrate", [running])
            waiting = "waiting for Job/migrate to be Complete"
            status_patch(
                api, "deployments", "web", [condition("Ready", "False", "Waiting", waiting)]
            )
            status_patch(api, "services", "web", [condition("Ready", "False", "NoEndpoints")])
        with browser(tmp_path) as context:
            page = context.new_page()
            page.set_viewport_size({"width": 1100, "height": 420})
            log_in(page, served, path="#/graph")
            expect(page.locator('#graph-svg a[data-state="ready"]')).to_have_count(2)
            page.hover('#graph-svg a[data-key="Deployment/default/web"]')
            expect(page.locator("#graph-tip")).to_contain_text("root blocker: Job/migrate")
            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot))
    finally:
        served.stop()
    if os.environ.get("SETPOINT_DOCS_SCREENSHOT") == "1":
        target = ROOT / "docs/images/dashboard.png"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, target)


def test_the_page_classifies_objects_as_the_server_does(served: Served, tmp_path: Path) -> None:
    """The page's `stateOf` (util.js, on the rules the server sends) and
    `insight.health.health` give every object the same state: run in Chromium over
    conditions, reasons and start/transition times of every kind."""
    start, before, after = (
        "2026-01-01T00:00:05.250Z",
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:09Z",
    )
    reasons = ["Running", "Completed", "CrashLoopBackOff", "ReadinessProbeFailed", "Other"]
    objects: list[dict[str, Any]] = [{"kind": "Event", "metadata": {"name": "e"}}]
    for status in ("True", "False", "Unknown"):
        for reason in reasons:
            for changed in (before, after, None, "not a time"):
                for started in (start, None):
                    ready = {"type": "Ready", "status": status, "reason": reason}
                    if changed is not None:
                        ready["lastTransitionTime"] = changed
                    st: dict[str, Any] = {"conditions": [ready]}
                    if started is not None:
                        st["startTime"] = started
                    objects.append({"kind": "Process", "metadata": {"name": "p"}, "status": st})
    for type_ in ("Stalled", "Failed", "ReplicaFailure"):
        for value in ("True", "False"):
            conditions = [{"type": type_, "status": value}, {"type": "Ready", "status": "True"}]
            objects.append({"kind": "Job", "status": {"conditions": conditions}})
    with browser(tmp_path) as context:
        page = context.new_page()
        page.goto(f"{served.url}/ui/")
        expect(page.locator("#login")).to_be_visible()
        on_page = page.evaluate(
            """async ([objects, rules]) => {
                const util = await import("/ui/util.js");
                util.setHealthRules(rules);
                return objects.map((o) => util.stateOf(o));
            }""",
            [objects, dict(RULES)],
        )
    assert on_page == [health(o).value for o in objects]
    assert {"ready", "progressing", "failed", "none"} <= set(on_page)


def test_serve_prints_a_link_that_logs_in(served: Served, tmp_path: Path) -> None:
    with browser(tmp_path, any_certificate=False) as context:
        page = context.new_page()
        page.goto(served.link)
        expect(page.locator("#main[data-ready=true]")).to_have_count(1)
        expect(page.locator("#login")).to_be_hidden()
        expect(page.locator("#logout")).to_be_visible()
        expect(page.locator("#objects .row[data-kind=Job][data-name=db-init]")).to_have_count(1)
