"""The dashboard's one-step login: one-time login codes, each exchanged once, within
`CODE_TTL_S` seconds, for a session token of the user it was made for.

    codes = LoginCodes(auth, clock)
    code = codes.issue(user)                     # `setpoint up` prints a link carrying it
    token = codes.redeem(code)                   # the page's POST /ui/login; None if not valid

The code travels in the URL's *fragment* (`http://127.0.0.1:PORT/ui/#login=CODE`), which
a browser never sends to a server: it is in no access log and no `Referer`. The page reads
it, POSTs it as JSON to `/ui/login` (same origin: `browser_safety` refuses another Host
or Origin before this is reached), and keeps the session token it gets in the tab's
sessionStorage. A code works once (it is forgotten when redeemed) and expires; a session
token is the user's role, kept in the server's memory only (it dies with the run; the
oldest are forgotten past `MAX_SESSIONS`). Only a digest of each code is kept.

Routes: `POST /ui/login` (no token: the code is the credential) and
`POST /apis/insight.setpoint.dev/v1alpha1/logincodes` (any authenticated caller gets a
code for *their own* role: `setpoint dashboard` asks for one with the kubeconfig's token).
What must not happen here: a code in a response header, a log line, or a URL sent to the
server; a code that works twice or late.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from setpoint.api.auth import Authenticator, User, new_token
from setpoint.api.resources import json_response
from setpoint.api.status import status_of
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import BadRequest, Unauthorized

CODE_TTL_S = 600.0
"""How long a login code works after it is made: long enough to click the link `up`
printed, short enough that an old terminal's scrollback opens nothing."""
MAX_CODES = 64
"""Codes kept at most (the oldest forgotten first)."""
MAX_SESSIONS = 256
"""Session tokens kept at most (the oldest forgotten first: that tab logs in again)."""
FRAGMENT = "login"
"""The fragment's key: `#login=CODE`."""
INSIGHT_PATH = "/apis/insight.setpoint.dev/v1alpha1/logincodes"


def _digest(code: str) -> bytes:
    return hashlib.sha256(code.encode("utf-8", "surrogateescape")).digest()


@dataclass
class LoginCodes:
    """One-time login codes for the users of `auth` (see the module docstring)."""

    auth: Authenticator
    clock: Clock = SYSTEM_CLOCK
    page_url: str | None = None
    """The dashboard's page (`http://127.0.0.1:PORT/ui/`), once its listener serves."""
    _codes: OrderedDict[bytes, tuple[User, float]] = field(default_factory=OrderedDict)
    _sessions: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def issue(self, user: User) -> str:
        """A new code for `user`, valid once for `CODE_TTL_S` seconds."""
        code = secrets.token_urlsafe(24)
        self._codes[_digest(code)] = (user, self.clock.monotonic() + CODE_TTL_S)
        while len(self._codes) > MAX_CODES:
            self._codes.popitem(last=False)
        return code

    def link(self, user: User) -> str | None:
        """The page's address with a new code for `user` in its fragment (None: no page)."""
        if self.page_url is None:
            return None
        return f"{self.page_url}#{FRAGMENT}={self.issue(user)}"

    def redeem(self, code: str) -> str | None:
        """A new session token for the user `code` was made for, and `code` forgotten; None
        when `code` is unknown, used already or expired."""
        wanted = _digest(code)
        found = None
        for known in list(self._codes):  # compare every one: no timing hint
            if hmac.compare_digest(known, wanted):
                found = known
        if found is None:
            return None
        user, expires = self._codes.pop(found)
        if self.clock.monotonic() > expires:
            return None
        token = new_token()
        self.auth.tokens[token] = user
        self._sessions[token] = None
        while len(self._sessions) > MAX_SESSIONS:
            old, _ = self._sessions.popitem(last=False)
            self.auth.tokens.pop(old, None)
        return token

    def routes(self, user_of: Callable[[Request], User]) -> list[Route]:
        """`POST /ui/login` and `POST .../logincodes` (`user_of`: the app's authentication,
        `Unauthorized` for nobody it knows)."""

        async def login(request: Request) -> Response:
            try:
                code = _code_of(await request.body())
                token = self.redeem(code)
                if token is None:
                    raise Unauthorized(
                        "the login link is not valid (used already, or older than "
                        f"{int(CODE_TTL_S // 60)} minutes): run `setpoint dashboard` for a new one"
                    )
            except (BadRequest, Unauthorized) as exc:
                body = status_of(exc)
                return json_response(body, body["code"])
            return _no_store(json_response({"kind": "Session", "token": token}))

        async def new_code(request: Request) -> Response:
            try:
                user = user_of(request)
            except Unauthorized as exc:
                body = status_of(exc)
                return json_response(body, body["code"])
            link = self.link(user)
            body = {"kind": "LoginLink", "url": link, "expiresInSeconds": CODE_TTL_S}
            return _no_store(json_response(body))

        return [
            Route("/ui/login", login, methods=["POST"]),
            Route(INSIGHT_PATH, new_code, methods=["POST"]),
        ]


def _no_store(response: Response) -> Response:
    """`response`, kept in no cache (it carries a credential)."""
    response.headers["Cache-Control"] = "no-store"
    return response


def _code_of(body: bytes) -> str:
    """The `code` of a `{"code": "..."}` body; `BadRequest` for anything else."""
    try:
        parsed = json.loads(body or b"null")
    except ValueError:
        raise BadRequest('the body is not JSON: want {"code": "..."}') from None
    code = parsed.get("code") if isinstance(parsed, dict) else None
    if not isinstance(code, str) or not code or len(code) > 200:
        raise BadRequest('want {"code": "..."}: the code of the login link')
    return code
