"""The Service controller: one `ServiceProxy` per Service, listening where its spec says,
and each Service's status, on the reconciler kit (`setpoint.runtime.kit`): observe (its
proxy, the endpoints in the Process cache) -> `plan` (pure) -> act (open or move the
listener); the kit writes the status.

A listen that fails (the port is held by another program) amends the plan: `Ready` False
with reason `ListenFailed` in its status, and a stall for the same reason (which the kit
records as `Stalled`), once, tried again every `LISTEN_RETRY_SECONDS`; nothing is written
while the port stays taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.model import Object
from setpoint.runtime.builder import request_for
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller
from setpoint.runtime.kit import Acted, KindRules, KitReconciler
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.workloads.kinds import PROCESS, SERVICE
from setpoint.workloads.service.plan import (
    Endpoint,
    ServiceDesired,
    ServiceObserved,
    ServicePlan,
    Target,
    desired_of,
    endpoints_of,
    plan,
    selects,
    service_status,
    target_of,
)
from setpoint.workloads.service.proxy import ProxyCounters, ProxyStatistics, ServiceProxy

log = logging.getLogger("setpoint.service")

LISTEN_RETRY_SECONDS = 5.0
"""How soon a Service whose listen failed (port in use, say) tries again."""
SHUTDOWN_GRACE_SECONDS = 2.0
"""How long connections in flight may go on once the engine stops, before they are cut."""


def services_selecting(services: Cache) -> Callable[[Object], Iterable[Request]]:
    """Map a Process to the Services (from the `services` cache) that select it."""

    def mapper(process: Object) -> Iterable[Request]:
        meta = process["metadata"]
        namespace = meta.get("namespace") or ""
        labels = meta.get("labels") or {}
        for svc in services.list(namespace):
            if selects(target_of(svc).selector, labels):
                yield request_for(svc)

    return mapper


Key = tuple[str, str]


class ServiceController(KitReconciler[ServiceDesired, ServiceObserved, ServicePlan]):
    """Keeps one `ServiceProxy` per Service listening where its spec says (see the module
    docstring), on the kit; `setup` wires it."""

    def __init__(
        self,
        store: Store,
        processes: Cache,
        *,
        clock: Clock = SYSTEM_CLOCK,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._processes = processes
        self._counters = None if registry is None else ProxyCounters(registry)
        self._proxies: dict[Key, ServiceProxy] = {}
        self._connections: set[asyncio.Task[Any]] = set()
        """Every connection in flight, through any proxy (listening or not)."""
        rules = KindRules(SERVICE, desired_of, self.observe, plan, self.act, cleanup=self.forget)
        super().__init__(store, rules, clock=clock)

    def endpoints(self, target: Target) -> list[Endpoint]:
        """The endpoints of `target` in the Process cache now."""
        if not target.selector:
            return []
        first = "=".join(target.selector[0])
        return endpoints_of(self._processes.by_index("label", first), target)

    def statistics(self, name: str, namespace: str = "default") -> ProxyStatistics | None:
        """The statistics of the Service's proxy, None if it has none (not listening)."""
        proxy = self._proxies.get((namespace, name))
        return None if proxy is None else proxy.statistics()

    # -- observe and act --------------------------------------------------------------

    async def observe(self, obj: Object, desired: ServiceDesired) -> ServiceObserved:
        """Where the Service's proxy listens, and the endpoints its selector picks now."""
        proxy = self._proxies.get(_key(obj))
        return ServiceObserved(
            None if proxy is None else proxy.listening,
            self.endpoints(desired.target),
            obj.get("status"),
        )

    async def act(self, obj: Object, step: ServicePlan) -> Acted[ServicePlan]:
        """Listen where the plan says; a listen that fails amends the plan (its status, a
        stall) and looks again in `LISTEN_RETRY_SECONDS`."""
        key = _key(obj)
        if not step.listen:
            self._proxies[key].target = step.target  # a new selector serves the next connection
            return Acted(obj, step)
        error = await self._listen(key, step.target)
        if error is None:
            return Acted(obj, step)
        status = service_status(
            obj.get("status"),
            step.target,
            [],
            generation=int(obj["metadata"].get("generation", 1)),
            listen_error=error,
            now=self.clock.now(),
        )
        failed = dataclasses.replace(
            step,
            status=status,
            stall=("ListenFailed", error),
            requeue_after=LISTEN_RETRY_SECONDS,
        )
        return Acted(obj, failed)

    async def forget(self, request: Request) -> None:
        """The Service is gone (or being deleted): close its listener."""
        self._close((request.namespace, request.name))

    async def _listen(self, key: Key, target: Target) -> str | None:
        """Listen where `target` says, instead of where the Service's proxy listened before
        (if anywhere); return why it cannot (or None)."""
        self._close(key)
        proxy = ServiceProxy(
            f"{key[0]}/{key[1]}",
            target,
            self.endpoints,
            connections=self._connections,
            counters=self._counters,
        )
        try:
            await proxy.open()
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            return f"cannot listen on {target.address}: {reason}"
        self._proxies[key] = proxy
        log.info("service %s/%s: listening on %s", key[0], key[1], target.address)
        return None

    def _close(self, key: Key) -> None:
        proxy = self._proxies.pop(key, None)
        if proxy is None:
            return
        proxy.close_listener()
        log.info("service %s/%s: stopped listening on %s", key[0], key[1], proxy.target.address)

    # -- wiring and shutdown ---------------------------------------------------------

    async def close_on_stop(self) -> None:
        """Wait until cancelled (the manager stopping), then `close_all`."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.close_all()

    async def close_all(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop listening everywhere; give connections in flight `grace` seconds to end,
        then cut them."""
        for key in list(self._proxies):
            self._close(key)
        tasks = set(self._connections)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            log.info("services: %d connections cut at shutdown", len(late))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*late, return_exceptions=True)


def _key(obj: Object) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def setup(manager: Manager, settings: None = None) -> Controller:
    """Add the Service controller to `manager`; return the controller (its `reconciler` is
    the `ServiceController`). (It takes no settings.) A Process change wakes every Service
    selecting that Process, before and after the change; a runnable closes every listener
    when the manager stops. Its metrics go to the manager's Prometheus registry
    (`setpoint_service_connections_total{service}`,
    `setpoint_service_connection_failures_total{service}`,
    `setpoint_service_connect_retries_total{service}`)."""
    del settings
    reconciler = ServiceController(
        manager.store,
        manager.cache(PROCESS),
        clock=manager.clock,
        registry=None if manager.metrics is None else manager.metrics.registry,
    )
    services = manager.cache(SERVICE)
    controller = (
        manager.controller("service")
        .for_(SERVICE, predicates=[generation_changed])
        .watches(PROCESS, services_selecting(services))
        .max_concurrent(4)
        .complete(reconciler)
    )
    manager.add_runnable(reconciler.close_on_stop)
    return controller
