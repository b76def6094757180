"""Leader election on a `Lease` object in the store, after client-go's leaderelection package.

Candidates race to write their identity into one Lease's `spec.holderIdentity`.
Every write is a compare-and-swap on `resourceVersion`, so this works on every
store backend and at most one write wins each round. The holder renews
`renewTime` every `retry_period`; the others take the lease over once it has
not changed for `lease_duration` *as measured on their own monotonic clock*
(like client-go, a candidate never trusts another host's timestamps: it notes
when it last saw the record change). A holder that cannot renew within
`renew_deadline` gives up; since `renew_deadline < lease_duration`, it stops
before anyone else may start.

    elector = LeaderElector(store, "my-controller", identity="host-a")
    await elector.acquire()          # returns once we hold the lease
    try:
        await elector.hold()         # returns when leadership is lost
    finally:
        await elector.release()      # a successor need not wait for expiry

All waiting is done with the injected clock's `sleep`, so tests drive it with
`setpoint.testing.ManualClock`. This module does no I/O besides store calls.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_validator

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Conflict, Error, Invalid, NotFound
from setpoint.model import Object, Schema
from setpoint.runtime.kinds import LEASE as LEASE
from setpoint.store import Store
from setpoint.tasks import first_done

log = logging.getLogger("setpoint.leases")


# -- micro-time ------------------------------------------------------------------


def micro_time(ts: float) -> str:
    """`2026-11-29T22:02:27.123456Z`: RFC 3339 with microseconds (Kubernetes MicroTime)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float:
    """Inverse of `micro_time`; accepts any RFC 3339 timestamp (fewer digits, offsets)."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not an RFC 3339 time; want e.g. 2026-11-29T22:02:27.123456Z"
        ) from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; want e.g. 2026-11-29T22:02:27.123456Z")
    return parsed.timestamp()


# -- the Lease kind --------------------------------------------------------------


class LeaseSpec(Schema):
    """Who holds the lease, since when, and for how long (coordination.k8s.io/v1 LeaseSpec)."""

    holder_identity: str | None = None
    """The current holder; empty when nobody holds it (released)."""
    lease_duration_seconds: int = Field(15, gt=0)
    """How long candidates wait, after the last change they saw, before taking over."""
    acquire_time: str | None = None
    """When the current holder acquired the lease (RFC 3339 with microseconds)."""
    renew_time: str | None = None
    """When the current holder last renewed the lease (RFC 3339 with microseconds)."""
    lease_transitions: int = Field(0, ge=0)
    """How many times the lease changed hands."""

    @field_validator("acquire_time", "renew_time")
    @classmethod
    def _micro_time(cls, value: str | None) -> str | None:
        return None if value is None else micro_time(parse_micro_time(value))


# -- settings --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    """Timing of leader election, in seconds (client-go's defaults).

    Requires lease_duration > renew_deadline > retry_period > 0.
    """

    lease_duration: float = 15.0
    """Candidates take over a lease whose record has not changed for this long."""
    renew_deadline: float = 10.0
    """The holder gives up if it has not renewed for this long."""
    retry_period: float = 2.0
    """How often the holder renews and candidates retry."""

    def __post_init__(self) -> None:
        if not self.retry_period > 0:
            raise Invalid(f"{self.retry_period!r}: want > 0", field="retry_period")
        if not self.renew_deadline > self.retry_period:
            raise Invalid(
                f"{self.renew_deadline!r}: want more than retry_period ({self.retry_period!r})",
                field="renew_deadline",
            )
        if not self.lease_duration > self.renew_deadline:
            raise Invalid(
                f"{self.lease_duration!r}: want more than renew_deadline ({self.renew_deadline!r})",
                field="lease_duration",
            )


# -- the elector -----------------------------------------------------------------


class _Outcome(enum.Enum):
    HELD = "held"
    """We hold the lease: this attempt created, took over or renewed it."""
    OTHER = "other"
    """Someone else holds the lease (when acquiring: and it has not expired)."""
    FAILED = "failed"
    """The write lost a race or the store failed; try again later."""


class LeaderElector:
    """Acquires, holds and releases one Lease for one identity; see the module docstring.

    One elector serves one candidate; `acquire`, `hold` and `release` are called
    in that order (and `acquire` again after a loss, if the caller wishes).
    """

    def __init__(
        self,
        store: Store,
        name: str,
        *,
        namespace: str = "default",
        identity: str,
        clock: Clock = SYSTEM_CLOCK,
        settings: LeaseSettings = LeaseSettings(),
        labels: dict[str, str] | None = None,
    ) -> None:
        if not identity:
            raise Invalid("want a non-empty identity", field="identity")
        store.registry.register(LEASE)
        self.store = store
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.settings = settings
        self.labels = dict(labels or {})
        """Labels of the lease when this elector creates it."""
        self._clock = clock
        self._is_leader = False
        # The last record (spec) we saw and when we first saw it (our monotonic clock).
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        # When the last successful write of ours was sent (our monotonic clock).
        self._renewed_at = 0.0

    @property
    def is_leader(self) -> bool:
        """True from a successful `acquire` until `hold` returns or `release` releases."""
        return self._is_leader

    async def acquire(self) -> None:
        """Return once this identity holds the lease, trying every `retry_period`.

        Creates the lease if absent; takes it over when it is released or when
        its record has not changed for `lease_duration` on our clock.
        """
        while True:
            if await self.try_acquire():
                log.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
                return
            await self._clock.sleep(self.settings.retry_period)

    async def try_acquire(self) -> bool:
        """One attempt to acquire the lease (create it, claim it if released or expired on
        our clock, or renew it if ours); return whether this identity holds it now."""
        return await self._attempt(renewing=False) is _Outcome.HELD

    async def hold(self) -> None:
        """Renew every `retry_period`; return when leadership is lost.

        Lost means: another identity holds the lease, or no renewal succeeded
        for `renew_deadline` (however long a store call hangs). Returns at once
        if we do not hold the lease.
        """
        if not self._is_leader:
            return
        renewer = asyncio.create_task(self._renew_until_taken(), name=f"lease-renew-{self.name}")
        watchdog = asyncio.create_task(self._wait_renew_deadline(), name=f"lease-dl-{self.name}")
        done = await first_done(renewer, watchdog)
        self._is_leader = False
        error = renewer.exception() if renewer in done else None
        if error is not None:
            raise error
        log.warning("lease %s/%s lost by %s", self.namespace, self.name, self.identity)

    async def release(self) -> bool:
        """Clear `holderIdentity` if we still hold the lease, so a successor need not wait
        for it to expire. Returns whether it cleared it."""
        self._is_leader = False
        while True:
            try:
                current = await self.store.get(
                    LEASE.api_version, LEASE.kind, self.name, self.namespace
                )
            except NotFound:
                return False
            spec = dict(current.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec.pop("holderIdentity", None)
            spec["renewTime"] = micro_time(self._clock.now())
            current["spec"] = spec
            try:
                await self.store.update(current)
            except Conflict:
                continue
            log.info("lease %s/%s released by %s", self.namespace, self.name, self.identity)
            return True

    # -- internals ---------------------------------------------------------------

    async def _renew_until_taken(self) -> None:
        while True:
            await self._clock.sleep(self.settings.retry_period)
            if await self._attempt(renewing=True) is _Outcome.OTHER:
                return

    async def _wait_renew_deadline(self) -> None:
        while True:
            left = self._renewed_at + self.settings.renew_deadline - self._clock.monotonic()
            if left <= 0:
                log.warning(
                    "lease %s/%s: no renewal for %ss",
                    self.namespace,
                    self.name,
                    self.settings.renew_deadline,
                )
                return
            await self._clock.sleep(left)

    async def _attempt(self, *, renewing: bool) -> _Outcome:
        """One try (client-go's tryAcquireOrRenew). Store errors other than `Invalid` are
        logged and count as a failed try."""
        try:
            return await self._try(renewing=renewing)
        except Invalid:
            raise
        except Error as exc:
            log.info("lease %s/%s: %s (will retry)", self.namespace, self.name, exc)
            return _Outcome.FAILED

    async def _try(self, *, renewing: bool) -> _Outcome:
        sent = self._clock.monotonic()
        try:
            current = await self.store.get(LEASE.api_version, LEASE.kind, self.name, self.namespace)
        except NotFound:
            try:
                created = await self.store.create(self._lease(self._claim({})))
            except AlreadyExists:
                return _Outcome.FAILED
            return self._won(created["spec"], sent)
        spec = current.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = spec, self._clock.monotonic()
        holder = spec.get("holderIdentity")
        if holder != self.identity:
            # As client-go: the holder's own duration, timed from when we saw the record change.
            duration = spec.get("leaseDurationSeconds") or self.settings.lease_duration
            expired = self._clock.monotonic() >= self._observed_at + duration
            if renewing or (holder and not expired):
                self._is_leader = False
                return _Outcome.OTHER
        current["spec"] = self._claim(spec)
        written = await self.store.update(current)  # Conflict: someone else wrote first
        return self._won(written["spec"], sent)

    def _claim(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The record after we acquire (or renew, if we hold it) the lease `spec` describes."""
        now = micro_time(self._clock.now())
        ours = spec.get("holderIdentity") == self.identity
        transitions = int(spec.get("leaseTransitions", 0))
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.settings.lease_duration)),
            "acquireTime": spec.get("acquireTime", now) if ours else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or not spec else transitions + 1,
        }

    def _won(self, spec: dict[str, Any], sent: float) -> _Outcome:
        """Record a write of ours that succeeded; `sent` is when we began it."""
        self._observed, self._observed_at = spec, self._clock.monotonic()
        self._renewed_at = sent
        self._is_leader = True
        return _Outcome.HELD

    def _lease(self, spec: dict[str, Any]) -> Object:
        return {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
            "spec": spec,
        }
