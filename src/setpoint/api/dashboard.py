"""The web dashboard's files under `/ui/`: the static assets in `setpoint/api/ui/`
(ES modules, CSS, one HTML page), served with a strict Content-Security-Policy.

The assets hold no data: the page asks for a token (or uses the one kept in the tab's
sessionStorage) and reads everything through the API with it, so these routes need no
token themselves; every byte of data the page shows is the API's, under its auth.
It must not read the store, nor serve any file outside `ui/`.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def routes() -> list[Route]:
    return [
        Route("/ui", _to_index, methods=["GET", "HEAD"]),
        Route("/ui/{path:path}", _asset, methods=["GET", "HEAD"]),
    ]


async def _to_index(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=308)


async def _asset(request: Request) -> Response:
    """A file of `ui/` by name (no directories), `index.html` for any other path (the
    page routes by its fragment)."""
    name = request.path_params["path"]
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in TYPES:
        name, suffix = "index.html", ".html"
    asset = resources.files("setpoint.api").joinpath("ui", name)
    if not asset.is_file():
        return Response("not found", 404, headers=HEADERS, media_type="text/plain")
    return Response(asset.read_bytes(), headers=HEADERS, media_type=TYPES[suffix])
