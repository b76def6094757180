"""One engine per store: the engine lease, who holds it, and taking it over from a dead holder.

An engine holds the Lease `setpoint-engine` (namespace `default`) in its store for as long as
it runs, renewed as leader election renews its leases (`setpoint.runtime.leases`). The lease
is in the store, so the rule holds for every process that shares the store, on any host.
Its `holderIdentity` is `HOST_PID_START` (see `EngineHolder`), so another engine can say who
holds it and, on the same host, whether that process still runs.

`claim_engine_lease` acquires the lease, or raises `EngineRunning` at once while its holder
may be alive (`running_engine` answers the same question without claiming: who runs, if
anyone, for `setpoint down` and `up -d`):

* a holder on this host runs if its pid runs with the start time it recorded (a pid that is
  gone, a zombie or a reused pid is a dead holder): a dead holder's lease is taken over at
  once, so a SIGKILLed engine never delays its restart;
* a holder on another host is alive while its last renewal (`renewTime`, on our wall clock)
  is within the lease duration; otherwise the lease is taken over once its record has not
  changed for the lease duration on our own monotonic clock, as leader election does.

Engines started with `--ha leader|shard` (coordination leader or shard) share the store and
hold no engine lease; the two kinds refuse each other: `running_members` names the
coordinated managers whose leases were renewed within their duration (`up --ha` refuses to
start beside a `single` engine, which `running_engine` names; a `single` one refuses to start
beside coordinated ones).

Store calls and a read of `/proc`; it never signals a process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.clock import Clock
from setpoint.errors import Conflict, EngineRunning, NotFound
from setpoint.model.wellknown import COORDINATION_LABEL
from setpoint.runtime.kinds import LEASE
from setpoint.runtime.leases import LeaderElector, LeaseSettings, parse_micro_time
from setpoint.store import Store
from setpoint.store.urls import shown_url

log = logging.getLogger("setpoint.engine")

ENGINE_LEASE = "setpoint-engine"
"""The name of the engine lease (in namespace `ENGINE_LEASE_NAMESPACE`)."""
ENGINE_LEASE_NAMESPACE = "default"
ENGINE_LEASE_SETTINGS = LeaseSettings(lease_duration=60.0, renew_deadline=40.0, retry_period=15.0)
"""Renewed every 15 s: one store write per 15 s. A holder on this host that died is taken
over at once; the 60 s duration only delays a takeover from a holder on another host."""

_CLAIM_ATTEMPTS = 5
"""Attempts before giving up when the lease keeps changing hands under us (a race of
several starting engines)."""


@dataclass(frozen=True, slots=True)
class EngineHolder:
    """An engine process: its host, pid and start time (clock ticks after boot, from
    `/proc/PID/stat`; 0 where unknown), so that a reused pid is not mistaken for it."""

    host: str
    pid: int
    start_time: int

    @classmethod
    def this_process(cls) -> EngineHolder:
        pid = os.getpid()
        stat = _proc_stat(pid)
        return cls(socket.gethostname(), pid, stat[1] if stat else 0)

    @property
    def identity(self) -> str:
        """The lease's `holderIdentity`: `HOST_PID_START`."""
        return f"{self.host}_{self.pid}_{self.start_time}"

    @classmethod
    def parse(cls, identity: str) -> EngineHolder | None:
        """The holder an identity names, or None if it is not an engine's."""
        host, _, rest = identity.rpartition("_")
        host, _, pid = host.rpartition("_")
        if not host or not pid.isdigit() or not rest.isdigit():
            return None
        return cls(host, int(pid), int(rest))

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}"

    @property
    def on_this_host(self) -> bool:
        return self.host == socket.gethostname()

    def runs(self) -> bool:
        """On this host: whether the process still runs (not gone, not a zombie, and not
        another process that got its pid)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, as another user
        stat = _proc_stat(self.pid)
        if stat is None:  # no /proc here: the pid exists, which is all we can tell
            return True
        state, start_time = stat
        return state not in ("Z", "X") and (self.start_time in (0, start_time))


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of `pid` from /proc, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()  # after comm, which may hold ") "
    return fields[0].decode(), int(fields[22 - 3])


async def claim_engine_lease(
    store: Store,
    holder: EngineHolder,
    *,
    store_url: str,
    clock: Clock,
    settings: LeaseSettings = ENGINE_LEASE_SETTINGS,
) -> LeaderElector:
    """Acquire the engine lease of `store` (named `store_url` in messages) for `holder`, or
    raise `EngineRunning` naming the engine that holds it (see the module docstring).
    Returns the elector holding the lease: keep it with `hold()`, give it back with
    `release()`."""
    elector = LeaderElector(
        store,
        ENGINE_LEASE,
        namespace=ENGINE_LEASE_NAMESPACE,
        identity=holder.identity,
        clock=clock,
        settings=settings,
    )
    for _ in range(_CLAIM_ATTEMPTS):
        if await elector.try_acquire():
            return elector
        lease = await _read_lease(store)
        spec: dict[str, Any] = (lease or {}).get("spec") or {}
        identity = spec.get("holderIdentity")
        if lease is None or not identity:
            continue  # deleted or released meanwhile: try again
        other = EngineHolder.parse(identity)
        named = str(other) if other else identity
        if other is not None and other.on_this_host:
            if other.runs():
                raise _refusal(store_url, named)
            log.warning("the engine lease's holder (%s) is gone: taking it over", named)
            await _clear_holder(store, lease)
            continue
        if _renewed_within(spec, clock.now(), settings.lease_duration):
            raise _refusal(store_url, named)
        log.warning(
            "the engine lease's holder (%s) has not renewed it for %.0f s: waiting for it to "
            "expire",
            named,
            settings.lease_duration,
        )
        while not await elector.try_acquire():
            await clock.sleep(settings.retry_period)
            lease = await _read_lease(store)
            renewed = (lease or {}).get("spec") or {}
            if renewed.get("holderIdentity") == identity and renewed != spec:
                raise _refusal(store_url, named)  # it renewed: it is alive after all
        return elector
    raise EngineRunning(
        "could not claim the engine lease: other engines are starting on this store",
        holder="unknown",
    )


def _refusal(store_url: str, holder: str) -> EngineRunning:
    return engine_running(store_url, holder)


def engine_running(store_url: str, holder: str) -> EngineRunning:
    """The refusal of a second engine on `store_url`, naming the one that runs."""
    return EngineRunning(
        f"an engine ({holder}) already runs on {shown_url(store_url)}; follow it with "
        "`setpoint logs -f` (or `setpoint get -w`), stop it with `setpoint down`",
        holder=holder,
    )


async def running_engine(
    store: Store, *, now: float, settings: LeaseSettings = ENGINE_LEASE_SETTINGS
) -> EngineHolder | None:
    """The engine that holds `store`'s engine lease and may be running (as
    `claim_engine_lease` judges it: on this host, its process runs; on another, it renewed
    the lease within its duration, judged at `now` on our wall clock), or None. A holder
    whose identity is not an engine's counts as none."""
    lease = await _read_lease(store)
    spec: dict[str, Any] = (lease or {}).get("spec") or {}
    holder = EngineHolder.parse(str(spec.get("holderIdentity") or ""))
    if holder is None:
        return None
    if holder.on_this_host:
        return holder if holder.runs() else None
    return holder if _renewed_within(spec, now, settings.lease_duration) else None


async def running_members(store: Store, *, now: float) -> list[str]:
    """The identities of coordinated managers (`--ha leader|shard`) on `store` that renewed
    a lease within its duration, judged at `now` on our wall clock."""
    leases, _ = await store.list(LEASE.api_version, LEASE.kind, label_selector=COORDINATION_LABEL)
    found: set[str] = set()
    for lease in leases:
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder and _renewed_within(spec, now, float(spec.get("leaseDurationSeconds") or 15)):
            found.add(str(holder))
    return sorted(found)


def coordinated_running(store_url: str, members: list[str]) -> EngineRunning:
    """The refusal of a `single` engine beside coordinated ones."""
    return EngineRunning(
        f"engines coordinated by leases (`up --ha`) run on {shown_url(store_url)}: "
        f"{', '.join(members)}; start this one with --ha too, or stop them first",
        holder=members[0],
    )


async def _read_lease(store: Store) -> dict[str, Any] | None:
    try:
        return await store.get(LEASE.api_version, LEASE.kind, ENGINE_LEASE, ENGINE_LEASE_NAMESPACE)
    except NotFound:
        return None


async def _clear_holder(store: Store, lease: dict[str, Any]) -> None:
    """Release a dead holder's lease (compare-and-swap: a lost race changes nothing)."""
    spec = dict(lease.get("spec") or {})
    spec.pop("holderIdentity", None)
    lease["spec"] = spec
    with contextlib.suppress(Conflict, NotFound):
        await store.update(lease)


def _renewed_within(spec: dict[str, Any], now: float, duration: float) -> bool:
    renewed = spec.get("renewTime")
    if not renewed:
        return False
    try:
        return now - parse_micro_time(str(renewed)) < duration
    except ValueError:
        return False
