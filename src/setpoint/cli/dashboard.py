"""`setpoint dashboard`: open the dashboard of the server running on the store (`setpoint
up` or `setpoint serve`) in the user's browser, logged in, or print the link when there is
no browser to open.

    setpoint dashboard               # opens http://127.0.0.1:PORT/ui/#login=CODE
    setpoint dashboard --print       # prints it only

The link is a new one-time login link (`setpoint.api.login`), asked of the server with
the kubeconfig's token (the one `up` and `serve` write in the store's workspace, or the
one `--server` / `$KUBECONFIG` name): it logs the browser in as that token's user, once,
within minutes. Also `dashboard_line`, the line `up` and `serve` print.
"""

from __future__ import annotations

import argparse
import webbrowser
from typing import TYPE_CHECKING

from setpoint.cli.context import Context, credentials_of
from setpoint.errors import Invalid, StoreUnavailable

if TYPE_CHECKING:
    import httpx

    from setpoint.api.server import ApiServer

LOGIN_CODES = "/apis/insight.setpoint.dev/v1alpha1/logincodes"
TIMEOUT_S = 30.0


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "dashboard",
        parents=parents,
        description="Open the dashboard of the server running on the store (setpoint up, "
        "setpoint serve) in your browser, logged in; print the link when there is no browser.",
    )
    p.add_argument(
        "--print", dest="print_only", action="store_true", help="print the link, open nothing"
    )
    p.set_defaults(run=run)


def dashboard_line(api: ApiServer, *, to_log: bool = False) -> str:
    """What `up` and `serve` print about the dashboard (`serving.dashboard_link`): one line
    that fits 80 columns (the link logs in once, within `login.CODE_TTL_S`; `setpoint
    dashboard` makes another). `to_log`: the output goes to a log file (an engine `up -d`
    started), where no login code is written: the line names `setpoint dashboard`."""
    from setpoint.api.serving import dashboard_link

    if to_log and api.login is not None:
        return "dashboard: `setpoint dashboard` opens it, logged in"
    return f"dashboard: {dashboard_link(api)}"


def run(ctx: Context, args: argparse.Namespace) -> int:
    link = login_link(ctx)
    if not args.print_only and _open(link):
        print("opened the dashboard in your browser")
        return 0
    print(link)
    return 0


def login_link(ctx: Context) -> str:
    """A new one-time login link, from the server the context names (or the one running on
    its local store, by the kubeconfig in the store's workspace)."""
    import httpx

    from setpoint.cli.store_location import read_kubeconfig
    from setpoint.engine import workspace_of

    if ctx.remote:
        url, credentials = ctx.store_url, ctx.credentials
    else:
        path = workspace_of(ctx.store_url).state_dir.parent / "kubeconfig"
        if not path.is_file():
            raise Invalid(
                f"no server runs on {ctx.store_shown}: start one with `setpoint up` or "
                "`setpoint serve` (they write its kubeconfig)"
            )
        location = read_kubeconfig(str(path))
        url, credentials = location.url, credentials_of(location)
    if credentials is None:
        raise Invalid(f"no credentials for {url}")
    try:
        with httpx.Client(
            headers=credentials.headers(), verify=credentials.verify(), timeout=TIMEOUT_S
        ) as client:
            response = client.post(url.rstrip("/") + LOGIN_CODES, json={})
    except httpx.HTTPError as exc:
        raise StoreUnavailable(
            f"no server answers at {url} ({exc}): is `setpoint up` or `setpoint serve` running?"
        ) from None
    body = _json(response)
    if response.status_code != 200:
        message = body.get("message") if isinstance(body, dict) else None
        raise Invalid(f"{url}: {message or f'HTTP {response.status_code}'}")
    link = body.get("url") if isinstance(body, dict) else None
    if not isinstance(link, str):
        raise Invalid(
            f"{url} serves no dashboard login (a server started with "
            f"--insecure-allow-anonymous-admin needs none: open {url}/ui/)"
        )
    return link


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _open(link: str) -> bool:
    """Whether a browser was started on `link` (stdlib `webbrowser`: `$BROWSER`, else the
    desktop's; none on a machine without one)."""
    try:
        return webbrowser.get().open(link)
    except webbrowser.Error:
        return False
