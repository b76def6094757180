"""Sharding: each key reconciled by exactly one live member of a group of managers that share
a store, assigned by consistent hashing over the members' leases.

The ring (`HashRing`, pure) places `vnodes` points per member on a 64-bit circle; a key
(`shard_key`: `namespace/name`) belongs to the member of the first point at or after its
own hash. Adding or removing one member of N moves about 1/N of the keys, and only to or
from that member.

Membership (`ShardMember`, I/O on the store): every member holds one Lease of its own
(`member_lease_name`), labelled with the group and renewed every `retry_period`. Its
annotations carry the member's *incarnation* (a fresh token each time it joins) and the
*view* it has adopted: the digest of the set of live members, as (identity, incarnation)
pairs, that it last computed.

Safety, which holds by construction (changes/sharding.md argues it at length):

* A member judges another dead only from fresh lists of the group's leases: the other's
  record must be unchanged in every list issued for `lease_duration` after the list that
  first showed it. A member that has not renewed for `renew_deadline` (< `lease_duration`)
  stops every reconcile and rejoins with a new incarnation, so a member judged dead has
  stopped (bounded clock drift assumed, as every lease does).
* Adopting a view V: first narrow the gate to keys owned under V too, wait for (then
  cancel) in-flight reconciles of the others, and only then publish V in our lease.
* A member starts a key only once *settled*: a list read after its own publication of V
  shows every member of V (same incarnations) publishing V. Until the next settlement it
  starts only keys it owns under V *and* under every view it published since.

So two live members never run one key: whoever starts it has seen the other publish the
same view, under which one owner exists, and the other publishes a view only after
draining what it does not own under it. Membership changes pause only the keys they move.

The manager (`setpoint.runtime.manager`, coordination `shard`) wires one member to all its
controllers (their `gate` is `may_start`) and wakes it on every Lease change.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Conflict, Error, Invalid, LeadershipLost, NotFound
from setpoint.model import Object
from setpoint.model.wellknown import (
    COORDINATION_LABEL,
    SHARD_GROUP_LABEL,
    SHARD_INCARNATION,
    SHARD_MEMBERS,
    SHARD_VIEW,
)
from setpoint.runtime.kinds import LEASE
from setpoint.runtime.leases import LeaseSettings, micro_time
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.tasks import first_done

log = logging.getLogger("setpoint.sharding")

VNODES = 128
"""Points per member on the ring: the more, the evener the shares (about +-10% at 128)."""
DEFAULT_LEASE = LeaseSettings()
"""Lease duration 15 s, renew deadline 10 s, retry period 2 s (client-go's defaults)."""


# -- the ring (pure) -------------------------------------------------------------


def shard_key(request: Request) -> str:
    """The key a request is sharded by: `namespace/name` (`/name` when cluster-scoped)."""
    return f"{request.namespace}/{request.name}"


def _point(text: str) -> int:
    """A stable 64-bit hash (the same in every process, unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """A consistent-hash ring over member identities; pure, immutable."""

    def __init__(self, members: Iterable[str], vnodes: int = VNODES) -> None:
        if vnodes < 1:
            raise Invalid("want at least 1", field="vnodes")
        self.members = frozenset(members)
        self.vnodes = vnodes
        points = sorted((_point(f"{m}#{i}"), m) for m in self.members for i in range(vnodes))
        self._points = [p for p, _ in points]
        self._owners = [m for _, m in points]

    def owner(self, key: str) -> str | None:
        """The member that owns `key` (None on an empty ring)."""
        if not self._points:
            return None
        index = bisect.bisect_left(self._points, _point(key))
        return self._owners[index % len(self._owners)]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HashRing) and (self.members, self.vnodes) == (
            other.members,
            other.vnodes,
        )

    def __hash__(self) -> int:
        return hash((self.members, self.vnodes))

    def __repr__(self) -> str:
        return f"HashRing({sorted(self.members)!r}, vnodes={self.vnodes})"


@dataclass(frozen=True, slots=True)
class View:
    """The live members as one member sees them: (identity, incarnation) pairs."""

    members: frozenset[tuple[str, str]]
    vnodes: int = VNODES

    @property
    def identities(self) -> frozenset[str]:
        return frozenset(identity for identity, _ in self.members)

    @property
    def digest(self) -> str:
        """What members publish to say they adopted this view (ring parameters included,
        so members configured differently never agree)."""
        text = json.dumps([self.vnodes, sorted(self.members)])
        return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()

    def ring(self) -> HashRing:
        return HashRing(self.identities, self.vnodes)


def member_lease_name(group: str, identity: str) -> str:
    """The name of `identity`'s lease in `group` (a valid object name for any identity)."""
    slug = "".join(c if c.isalnum() else "-" for c in identity.lower()).strip("-")[:40]
    return f"{group}-{slug}-{hashlib.blake2b(identity.encode(), digest_size=4).hexdigest()}"


class Liveness:
    """Which member leases are live, judged from fresh lists only; pure (times are arguments).

    A lease is live while it has a holder and its record (resourceVersion) has not stayed
    the same in every list issued during `lease_duration` after the list that first showed
    it (times on our monotonic clock). A list issued later that still shows the record
    proves its holder wrote nothing meanwhile, so it has given up by its renew deadline.
    """

    def __init__(self, lease_duration: float) -> None:
        self.lease_duration = lease_duration
        self._seen: dict[str, tuple[str, float]] = {}  # lease name -> (rv, first seen at)
        self._issued_at = -math.inf

    def observe(self, leases: Sequence[Object], *, issued_at: float, returned_at: float) -> None:
        """Take in one fresh list of leases, issued and returned at these times."""
        seen: dict[str, tuple[str, float]] = {}
        for lease in leases:
            name = lease["metadata"]["name"]
            rv = str(lease["metadata"].get("resourceVersion"))
            previous = self._seen.get(name)
            seen[name] = previous if previous and previous[0] == rv else (rv, returned_at)
        self._seen = seen
        self._issued_at = issued_at

    def is_live(self, lease: Object) -> bool:
        """Whether `lease` (from the last list observed) is held and not expired."""
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            return False
        seen = self._seen.get(lease["metadata"]["name"])
        return seen is None or self._issued_at < seen[1] + self._duration(spec)

    def next_expiry(self) -> float | None:
        """The earliest monotonic time at which a list issued may find a lease expired."""
        return min((at + self.lease_duration for _, at in self._seen.values()), default=None)

    def _duration(self, spec: dict[str, Any]) -> float:
        # The longer of ours and the holder's own: never expire a lease early.
        return max(self.lease_duration, float(spec.get("leaseDurationSeconds") or 0))


def incarnation_of(lease: Object) -> str:
    return str((lease["metadata"].get("annotations") or {}).get(SHARD_INCARNATION, ""))


def view_of(lease: Object) -> str:
    return str((lease["metadata"].get("annotations") or {}).get(SHARD_VIEW, ""))


# -- the member (I/O) ---------------------------------------------------------------


class ShardedController(Protocol):
    """What a member needs of each controller it gates (`Controller` is one)."""

    async def stop_keys(self, keep: Callable[[Request], bool], *, grace: float) -> None: ...

    def enqueue_cached(self, select: Callable[[Request], bool]) -> int: ...


class ShardMember:
    """One manager's membership in a shard group; see the module docstring.

    `run()` joins and keeps the membership until cancelled (or until it cannot renew: then
    it stops every reconcile and joins again); `leave()` afterwards deletes the lease, so
    the others take over at once. `may_start(request)` is the controllers' gate.
    """

    def __init__(
        self,
        store: Store,
        *,
        group: str,
        identity: str,
        namespace: str = "default",
        clock: Clock = SYSTEM_CLOCK,
        settings: LeaseSettings = DEFAULT_LEASE,
        vnodes: int = VNODES,
    ) -> None:
        if not identity:
            raise Invalid("want a non-empty identity", field="identity")
        store.registry.register(LEASE)
        self.store = store
        self.group = group
        self.identity = identity
        self.namespace = namespace
        self.settings = settings
        self.vnodes = vnodes
        self.lease_name = member_lease_name(group, identity)
        self.controllers: list[ShardedController] = []
        self._clock = clock
        self._changed = asyncio.Event()
        self._incarnation: str | None = None
        self._past_incarnations: set[str] = set()
        self._lease: Object | None = None
        self._written_at = 0.0  # when our last successful write was sent (monotonic)
        self._published: View | None = None
        self._published_rv = 0
        self._settled: View | None = None
        self._unsettled = False  # adopted a view and not settled on it since
        # None: start nothing. Else: start a key only if we own it in every ring listed
        # (the settled view's, then every view published since).
        self._allowed: list[HashRing] | None = None
        self._liveness = Liveness(settings.lease_duration)
        self.settlements = 0
        """How many times this member settled on a view."""
        self._settlement_waiters: list[asyncio.Future[None]] = []

    # -- what controllers and the manager call -------------------------------------

    def may_start(self, request: Request) -> bool:
        """Whether this member may start reconciling `request` now."""
        allowed = self._allowed
        if allowed is None:
            return False
        key = shard_key(request)
        return all(ring.owner(key) == self.identity for ring in allowed)

    @property
    def settled(self) -> View | None:
        """The view this member last settled on (None before it settles, or after it
        stopped for want of renewals)."""
        return self._settled

    async def wait_settled(self, after: int = 0) -> View:
        """The view this member settles on, once it has settled more than `after` times."""
        while self.settlements <= after or self._settled is None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._settlement_waiters.append(waiter)
            await waiter
        return self._settled

    def notify(self) -> None:
        """A lease may have changed: look again now (the manager calls this on every Lease
        event)."""
        self._changed.set()

    async def run(self) -> None:
        """Join, then keep the membership: renew, follow the others, adopt and settle views.
        Runs until cancelled; stops every reconcile and rejoins if it cannot renew in time."""
        try:
            while True:
                await self._join()
                loop = asyncio.create_task(self._follow(), name=f"shard-{self.identity}")
                deadline = asyncio.create_task(self._wait_renew_deadline())
                done = await first_done(loop, deadline)
                error = loop.exception() if loop in done else None
                if error is not None:
                    raise error
                if deadline in done:
                    log.warning(
                        "shard %s: %s could not renew its lease within %ss: stopping its "
                        "reconciles, joining again",
                        self.group,
                        self.identity,
                        self.settings.renew_deadline,
                    )
                await self._stop_everything()
        finally:
            self._close_gate()

    async def leave(self) -> None:
        """Delete our lease (call once `run` is cancelled and no reconcile runs), so the
        others need not wait for it to expire."""
        incarnation, self._incarnation = self._incarnation, None
        self._close_gate()
        if incarnation is None:
            return
        for _ in range(5):
            try:
                current = await self._get_lease()
                if current is None or incarnation_of(current) != incarnation:
                    return
                await self.store.delete(
                    LEASE.api_version,
                    LEASE.kind,
                    self.lease_name,
                    self.namespace,
                    resource_version=current["metadata"]["resourceVersion"],
                )
                log.info("shard %s: %s left", self.group, self.identity)
                return
            except (Conflict, NotFound):
                continue

    # -- joining -------------------------------------------------------------------

    async def _join(self) -> None:
        """Return once we hold our lease under a new incarnation: create it, or take it
        over when it is free, an earlier incarnation of ours in this process, or expired."""
        liveness = Liveness(self.settings.lease_duration)
        incarnation = uuid.uuid4().hex[:12]
        while True:
            issued = self._clock.monotonic()
            try:
                current = await self._get_lease()
                liveness.observe(
                    [current] if current else [],
                    issued_at=issued,
                    returned_at=self._clock.monotonic(),
                )
                if current is None:
                    written = await self.store.create(self._record(incarnation, None, None))
                elif incarnation_of(current) in self._past_incarnations or not liveness.is_live(
                    current
                ):
                    written = await self.store.update(self._record(incarnation, None, current))
                else:
                    written = None
            except (AlreadyExists, Conflict):
                written = None  # another process wrote it first: look again after a while
            except Error as exc:
                if isinstance(exc, Invalid):
                    raise
                log.info("shard %s: cannot join yet: %s", self.group, exc)
                written = None
            if written is not None:
                self._incarnation = incarnation
                self._past_incarnations.add(incarnation)
                self._lease, self._written_at = written, issued
                self._published, self._settled, self._allowed = None, None, None
                self._liveness = Liveness(self.settings.lease_duration)
                log.info("shard %s: %s joined (%s)", self.group, self.identity, incarnation)
                return
            await self._clock.sleep(self.settings.retry_period)

    # -- following the group -----------------------------------------------------------

    async def _follow(self) -> None:
        """List the group's leases, renew ours, adopt the live view, settle; repeat on every
        lease change, renewal time or possible expiry."""
        while True:
            self._changed.clear()
            if self._incarnation is None:
                return  # the renew deadline passed meanwhile: `run` stops all and rejoins
            try:
                await self._step()
            except LeadershipLost:
                self._close_gate()
                self._incarnation = None
                log.warning("shard %s: another process took %s's lease", self.group, self.identity)
                return
            except Error as exc:
                if isinstance(exc, Invalid):
                    raise
                log.info("shard %s: %s (will retry)", self.group, exc)
                await self._clock.sleep(self.settings.retry_period / 2)
                continue
            await self._wait_for_change()

    async def _step(self) -> None:
        assert self._incarnation is not None
        issued = self._clock.monotonic()
        leases, revision = await self.store.list(
            LEASE.api_version,
            LEASE.kind,
            self.namespace,
            label_selector=f"{SHARD_GROUP_LABEL}={self.group}",
        )
        self._liveness.observe(leases, issued_at=issued, returned_at=self._clock.monotonic())
        by_name = {lease["metadata"]["name"]: lease for lease in leases}
        ours = by_name.get(self.lease_name)
        if ours is not None and incarnation_of(ours) != self._incarnation:
            raise _displaced(self)
        members = {(self.identity, self._incarnation)}
        for lease in leases:
            holder = (lease.get("spec") or {}).get("holderIdentity")
            if lease is not ours and holder and self._liveness.is_live(lease):
                members.add((str(holder), incarnation_of(lease)))
        view = View(frozenset(members), self.vnodes)
        if view != self._published:
            await self._adopt(view)
            self._changed.set()  # look again at once: the others may have moved too
            return
        if self._clock.monotonic() >= self._written_at + self.settings.retry_period:
            await self._write(view)
            return
        if (
            self._unsettled
            and revision >= self._published_rv
            and all(self._publishes(by_name, identity, inc, view) for identity, inc in members)
        ):
            self._settle(view)

    def _publishes(self, by_name: dict[str, Object], identity: str, inc: str, view: View) -> bool:
        lease = by_name.get(member_lease_name(self.group, identity))
        return (
            lease is not None
            and (lease.get("spec") or {}).get("holderIdentity") == identity
            and incarnation_of(lease) == inc
            and view_of(lease) == view.digest
        )

    async def _adopt(self, view: View) -> None:
        """Narrow the gate to keys we own under `view` too, drain the others (renewing our
        lease meanwhile: a Process's child may take its grace period to stop), publish."""
        if self._allowed is not None:
            self._allowed = [*self._allowed, view.ring()]
        grace = self.settings.retry_period / 2
        await self._renewing_while(
            asyncio.gather(*(c.stop_keys(self.may_start, grace=grace) for c in self.controllers))
        )
        await self._write(view)
        self._unsettled = True  # even if it is the view we last settled on: we left it since
        log.info(
            "shard %s: %s adopted a view of %d members: %s",
            self.group,
            self.identity,
            len(view.members),
            ", ".join(sorted(view.identities)),
        )

    async def _renewing_while(self, work: Awaitable[object]) -> None:
        """Await `work`, renewing our lease (with the view published so far) when due."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                due = self._written_at + self.settings.retry_period - self._clock.monotonic()
                timer = asyncio.ensure_future(self._clock.sleep(max(0.0, due)))
                try:
                    await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    timer.cancel()
                if task.done():
                    task.result()
                    return
                await self._write(self._published)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def _settle(self, view: View) -> None:
        """Every member publishes `view`: start the keys we own under it, and put in line
        those we could not start before."""
        rings_before = self._allowed
        self._allowed = [view.ring()]
        self._settled = view
        self._unsettled = False
        self.settlements += 1

        def gained(request: Request) -> bool:
            if not self.may_start(request):
                return False
            if rings_before is None:
                return True
            key = shard_key(request)
            return not all(ring.owner(key) == self.identity for ring in rings_before)

        queued = sum(c.enqueue_cached(gained) for c in self.controllers)
        waiters, self._settlement_waiters = self._settlement_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        log.info(
            "shard %s: %s settled on %d members; %d keys newly its own",
            self.group,
            self.identity,
            len(view.members),
            queued,
        )

    async def _write(self, view: View | None) -> None:
        """Renew our lease, publishing `view` as adopted and drained for (None: none yet)."""
        incarnation = self._incarnation
        assert incarnation is not None
        assert self._lease is not None
        sent = self._clock.monotonic()
        try:
            written = await self.store.update(self._record(incarnation, view, self._lease))
        except Conflict:
            current = await self._get_lease()
            if current is None or incarnation_of(current) != incarnation:
                raise _displaced(self) from None
            self._lease = current
            raise
        except NotFound:
            raise _displaced(self) from None
        if self._incarnation != incarnation:
            return  # we gave up meanwhile: this write must not count
        self._lease, self._written_at = written, sent
        self._published = view
        self._published_rv = int(written["metadata"]["resourceVersion"])

    async def _wait_for_change(self) -> None:
        """Until a lease changes, our renewal is due, or a lease may have expired."""
        now = self._clock.monotonic()
        wake = self._written_at + self.settings.retry_period
        expiry = self._liveness.next_expiry()
        if expiry is not None and expiry > now:
            wake = min(wake, expiry)
        changed = asyncio.ensure_future(self._changed.wait())
        timer = asyncio.ensure_future(self._clock.sleep(max(0.0, wake - now)))
        await first_done(changed, timer)

    # -- giving up -------------------------------------------------------------------

    async def _wait_renew_deadline(self) -> None:
        """Return (gate closed) once no write of ours succeeded for `renew_deadline`."""
        while True:
            left = self._written_at + self.settings.renew_deadline - self._clock.monotonic()
            if left <= 0:
                self._close_gate()
                self._incarnation = None
                return
            await self._clock.sleep(left)

    def _close_gate(self) -> None:
        """Start nothing from now on (synchronous: no reconcile can start after it)."""
        self._allowed, self._settled, self._published = None, None, None

    async def _stop_everything(self) -> None:
        await asyncio.gather(*(c.stop_keys(_nothing, grace=0) for c in self.controllers))

    # -- the record --------------------------------------------------------------

    async def _get_lease(self) -> Object | None:
        try:
            return await self.store.get(
                LEASE.api_version, LEASE.kind, self.lease_name, self.namespace
            )
        except NotFound:
            return None

    def _record(self, incarnation: str, view: View | None, current: Object | None) -> Object:
        now = micro_time(self._clock.now())
        spec = dict((current or {}).get("spec") or {})
        ours = current is not None and incarnation_of(current) == incarnation
        annotations = {SHARD_INCARNATION: incarnation}
        if view is not None:
            annotations[SHARD_VIEW] = view.digest
            annotations[SHARD_MEMBERS] = ",".join(sorted(view.identities))
        metadata: dict[str, Any] = {
            **((current or {}).get("metadata") or {}),
            "name": self.lease_name,
            "namespace": self.namespace,
            "labels": {SHARD_GROUP_LABEL: self.group, COORDINATION_LABEL: "shard"},
            "annotations": annotations,
        }
        transitions = int(spec.get("leaseTransitions", 0))
        return {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, math.ceil(self.settings.lease_duration)),
                "acquireTime": spec.get("acquireTime", now) if ours else now,
                "renewTime": now,
                "leaseTransitions": transitions if ours or current is None else transitions + 1,
            },
        }


def _displaced(member: ShardMember) -> LeadershipLost:
    """Someone else wrote (or deleted) our lease: we no longer hold it."""
    return LeadershipLost(f"shard {member.group}: {member.identity}'s lease was taken over")


def _nothing(_: Request) -> bool:
    return False
