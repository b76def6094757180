"""Calling admission webhooks over HTTPS for the store (`setpoint.store.webhooks`), and
installing that caller in a store (`install_webhooks`, run by `setpoint serve` and
`setpoint up` before they serve).

`HttpsWebhookCaller.call` POSTs one AdmissionReview to a webhook's `clientConfig.url` and
returns the JSON it answered. It trusts only the configuration's `caBundle` when one is
given (else the system's roots), checks the host name, follows no redirect, uses no proxy
from the environment, reads at most `MAX_ANSWER_BYTES`, and gives up after the webhook's
`timeoutSeconds`. Every failure is one `WebhookFailed` line, which the webhook's
`failurePolicy` turns into a refused write (Fail) or a skipped webhook (Ignore).

Only the transport: which webhooks a write calls, and what their answers mean, is decided by
the store and the model, not here.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import orjson

from setpoint.errors import WebhookFailed
from setpoint.model.webhooks import MUTATING, VALIDATING
from setpoint.store.backend import Backend
from setpoint.store.base import Store
from setpoint.store.webhooks import WebhookAdmission, WebhookCaller

MAX_ANSWER_BYTES = 3 * 1024 * 1024
"""A webhook's answer is read up to this size (an object's limit, base64 for a patch)."""


class HttpsWebhookCaller:
    """The `WebhookCaller` of a real server: see the module docstring."""

    def __init__(self) -> None:
        self._contexts: dict[bytes | None, ssl.SSLContext] = {}

    async def call(
        self, url: str, review: dict[str, Any], *, ca_bundle: bytes | None, timeout_seconds: float
    ) -> Any:
        import httpx  # here: a process that never calls a webhook never imports it

        try:
            context = self._context(ca_bundle)
        except ssl.SSLError as exc:
            raise WebhookFailed(f"its caBundle holds no usable certificate: {exc}") from None
        try:
            async with asyncio.timeout(timeout_seconds):
                return await self._post(url, review, context, timeout_seconds)
        except (TimeoutError, httpx.TimeoutException):  # whichever of the two fires first
            raise WebhookFailed(
                f'Post "{url}": no answer within {timeout_seconds:g} s (timeoutSeconds)'
            ) from None
        except httpx.HTTPError as exc:
            reason = _reason(exc)
            raise WebhookFailed(f'Post "{url}": {reason}') from None

    async def _post(
        self, url: str, review: dict[str, Any], context: ssl.SSLContext, timeout_seconds: float
    ) -> Any:
        import httpx

        async with (
            httpx.AsyncClient(
                verify=context,
                trust_env=False,
                follow_redirects=False,
                timeout=timeout_seconds,
            ) as client,
            client.stream(
                "POST",
                url,
                content=orjson.dumps(review),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            ) as response,
        ):
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise WebhookFailed(
                        f'Post "{url}": the answer is over {MAX_ANSWER_BYTES} bytes'
                    )
            if response.status_code != 200:
                raise WebhookFailed(f'Post "{url}": answered HTTP {response.status_code}')
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise WebhookFailed(f'Post "{url}": the answer is not JSON') from None

    def _context(self, ca_bundle: bytes | None) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle is None:
                context = ssl.create_default_context()
            else:
                context = ssl.create_default_context(cadata=ca_bundle.decode("ascii", "replace"))
            self._contexts[ca_bundle] = context
        return context


def _reason(exc: Exception) -> str:
    """The innermost cause of `exc`, on one line (a certificate refused says why)."""
    cause: BaseException = exc
    for _ in range(10):  # a chain is short; a cycle in one must not hang the write
        inner = cause.__cause__ or cause.__context__
        if inner is None:
            break
        cause = inner
    return " ".join(str(cause).split()) or type(cause).__name__


async def install_webhooks(store: Store, caller: WebhookCaller | None = None) -> bool:
    """Let `store`'s writes pass the admission webhooks its configurations name, called by
    `caller` (default: `HttpsWebhookCaller`); the configurations already stored are read now,
    later ones as they are written. False, nothing done, for a store that is another
    server's (`http(s)://`: that server admits its writes)."""
    if not isinstance(store, Backend):
        return False
    if store.webhooks is not None:
        return True
    admission = WebhookAdmission(caller or HttpsWebhookCaller())
    store.webhooks = admission  # first: what is committed while the list is read is learnt
    for kind in (MUTATING, VALIDATING):
        items, _ = await store.list(kind.api_version, kind.kind)
        for obj in items:
            admission.learn(obj, deleted=False)  # unless a newer state was learnt meanwhile
    return True
