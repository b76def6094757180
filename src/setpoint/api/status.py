"""Failures as Kubernetes `Status` objects (meta/v1): every error the API answers with is
one of these, with the HTTP code and the `reason` clients act on. Pure: no I/O.

`status_of(exc, target)` maps the `setpoint.errors` tree (each class carries its `code` and
`reason`): NotFound 404, AlreadyExists and Conflict 409, Invalid 422 (with
`details.causes` naming the field), Gone 410, BadRequest 400, Unauthorized 401,
Forbidden 403, RequestEntityTooLarge 413, UnsupportedMediaType 415. Anything else is a
500 whose message names the error's class only: a body never holds a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from setpoint.errors import Error, Invalid

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass(frozen=True, slots=True)
class Target:
    """What a request was about, for a Status's `details`: resource (plural), group, name,
    and the kind (an Invalid's details name the kind, as the API server's do)."""

    resource: str = ""
    group: str = ""
    name: str = ""
    kind: str = ""


def status(
    code: int,
    message: str,
    *,
    reason: str | None = None,
    target: Target | None = None,
    causes: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A failure `Status` with `code` and `message` (`reason` defaults from the code)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, "Unknown"),
        "code": code,
    }
    details: dict[str, Any] = {}
    if target is not None:
        for key, value in (("name", target.name), ("group", target.group)):
            if value:
                details[key] = value
        if target.resource:
            details["kind"] = target.resource
    if causes:
        details["causes"] = causes
    if details:
        body["details"] = details
    return body


def success(target: Target, uid: str | None = None) -> dict[str, Any]:
    """The `Status` of a delete that removed the object at once."""
    details: dict[str, Any] = {"name": target.name, "group": target.group, "kind": target.resource}
    if uid:
        details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def status_of(exc: BaseException, target: Target | None = None) -> dict[str, Any]:
    """The `Status` answering `exc`."""
    if not isinstance(exc, Error):
        return status(500, f"internal error: {type(exc).__name__} (see the server's log)")
    code, reason = exc.code, exc.reason
    message = " ".join(str(exc).split()) or reason
    causes = getattr(exc, "causes", None) or None  # a server-side apply's Conflict
    if isinstance(exc, Invalid) and code == 422:
        field = exc.field or _field_in(message)
        detail = message.removeprefix(f"{field}: ") if field else message
        causes = [{"reason": "FieldValueInvalid", "message": detail, "field": field or ""}]
        if target is not None:
            what = target.kind or target.resource
            group = f".{target.group}" if target.group else ""
            message = f'{what}{group} "{target.name}" is invalid: {message}'
            target = Target(target.kind or target.resource, target.group, target.name)
    return status(code, message, reason=reason, target=target, causes=causes)


def _field_in(message: str) -> str | None:
    """The field a validation message starts with (`spec.replicas: ...`), if it does."""
    head, separator, _ = message.partition(": ")
    if separator and head and " " not in head and not head.endswith(")"):
        return head
    return None
