"""A web page on another origin, in the real headless Chromium, tries to create a Process
through the API with what a page can send without a preflight: a `no-cors` fetch with a
body of no declared type, and a `text/plain` form. The API runs with no tokens at all
(`--insecure-allow-anonymous-admin`, before: the default), so only the browser-safety rules
(`setpoint.api.browser_safety`) stand in the way. The store must hold no Process after."""

from __future__ import annotations

import asyncio
import html
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dashboard_kit import TIMEOUT_S, browser, chromium

from setpoint.api.app import create_app
from setpoint.api.server import ApiServer
from setpoint.engine.kinds import builtin_kinds
from setpoint.store import open_reader, open_store

PROCESSES = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"


@contextmanager
def api_without_tokens(store_url: str) -> Iterator[str]:
    """The API app with `auth=None` on `store_url`, served in a thread of its own on a free
    loopback port; yields its URL."""
    ready = threading.Event()
    stop = threading.Event()
    url: list[str] = []
    failure: list[BaseException] = []

    async def main() -> None:
        store = await open_store(store_url, builtin_kinds())
        try:
            async with ApiServer(create_app(store, auth=None)) as server:
                url.append(server.url)
                ready.set()
                await asyncio.to_thread(stop.wait)
        finally:
            await store.close()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:
            failure.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="api", daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT_S), "the API did not start"
    assert not failure, failure
    try:
        yield url[0]
    finally:
        stop.set()
        thread.join(TIMEOUT_S)


def attacker_page(api: str) -> str:
    """A page whose script posts a Process running `sh -c` both ways, then says `done`."""
    process = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "fetched"},
        "spec": {"args": ["sh", "-c", "echo owned > /tmp/owned"]},
    }
    # A text/plain form sends `name=value`: the `=` lands inside an annotation's value.
    name = (
        '{"apiVersion":"setpoint.dev/v1alpha1","kind":"Process",'
        '"metadata":{"name":"formed","annotations":{"a":"'
    )
    value = '"}},"spec":{"args":["sh","-c","echo owned > /tmp/owned"]}}'
    target = api + PROCESSES
    return f"""<!doctype html>
<html><body>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="POST" enctype="text/plain" target="sink" action="{html.escape(target)}">
<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">
</form>
<script>
(async () => {{
  const body = {json.dumps(json.dumps(process))};
  try {{
    await fetch({json.dumps(target)}, {{method: "POST", mode: "no-cors", body: new Blob([body])}});
  }} catch (e) {{}}
  document.getElementById("sink").addEventListener("load", () => {{ document.title = "done"; }});
  document.getElementById("form").submit();
}})();
</script>
</body></html>"""


@contextmanager
def page_server(page: str) -> Iterator[str]:
    """`page` served at `/` on another loopback port (another origin); yields its URL."""
    body = page.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_another_origin_cannot_create_a_process(tmp_path: Path) -> None:
    chromium()
    from playwright.sync_api import expect

    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    with (
        api_without_tokens(store_url) as api,
        page_server(attacker_page(api)) as attacker,
        browser(tmp_path) as context,
    ):
        page = context.new_page()
        answers: list[tuple[str, int]] = []
        page.on(
            "response",
            lambda r: (
                answers.append((r.request.method, r.status)) if r.url.startswith(api) else None
            ),
        )
        page.goto(attacker)
        expect(page).to_have_title("done", timeout=TIMEOUT_S * 1000)
        assert sorted(answers) == [("POST", 403), ("POST", 403)], answers

    reader = open_reader(store_url, builtin_kinds())
    assert reader is not None
    try:
        items, _ = reader.list("setpoint.dev/v1alpha1", "Process", None)
    finally:
        reader.close()
    assert items == [], [o["metadata"]["name"] for o in items]
