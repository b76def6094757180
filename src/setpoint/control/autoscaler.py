"""The `Autoscaler` kind (setpoint.dev/v1alpha1, namespaced, short name `as`) and its
controller: hold a metric at a target by scaling any kind with a scale subresource.

`spec`:

* `scaleTargetRef` {`apiVersion` (default setpoint.dev/v1alpha1), `kind`, `name`}: the
  object to scale, in the Autoscaler's namespace (a Deployment, or any kind registered
  with `scale=ScaleSubresource()`);
* `minReplicas` (1), `maxReplicas` (required);
* `metric`: one of `http` {`url`, `pointer`}, `prometheus` {`url`, `name`, `labels`},
  `command` {`args`} (see `setpoint.control.metrics_source`; it runs as the target's
  children would: as its template's `user:`, or the engine's user without one, if the
  engine's `UserPolicy` allows it, with a child's minimal environment), and `target` (> 0),
  `targetType` `Value` (the metric is per replica: `ceil(current * metric / target)`)
  or `AverageValue` (the metric is a total to share: `ceil(metric / target)`),
  `tolerance` (0.1), `timeoutSeconds` (5);
* `algorithm`: `ratio` (the Kubernetes HPA's rule), `pid` (`spec.pid`: `kp`, `ki`,
  `kd`, `deadband`, `relativeDeadband`, `noiseBand`, `downGain`; see
  `setpoint.control.scaling.PidGains`) or `predictive` (no gains to set: see
  `setpoint.control.predictive`); the pid and predictive algorithms see the metric as
  the `Value` form (per replica: an `AverageValue` metric is divided by the current
  count);
* `arrivals` (optional, predictive only): one source as in `metric` (`http`,
  `prometheus`, `command`, and `timeoutSeconds`) giving the arrival rate of the target's
  load in requests a second, read with the metric: the algorithm's feed-forward above
  the target, where the metric counts the queue too. Unreadable, the period decides
  without it (`status.lastDecision.arrivalsError` says why);
* `behavior`: as the HPA's, `scaleUp` / `scaleDown` each with
  `stabilizationWindowSeconds`, `selectPolicy` (Max | Min | Disabled) and `policies`
  [{`type` Pods | Percent, `value`, `periodSeconds`}]; what is left out takes the HPA's
  defaults (up: 0 s, max(4 pods, 100 %) per 15 s; down: 300 s, 100 % per 15 s), except
  that the pid and predictive algorithms' scale-down window defaults to 0 s
  (`PID_SCALE_DOWN`) and the predictive one's scale-up to max(4 pods, 1000 %) per 15 s
  (`PREDICTIVE_SCALE_UP`);
* `periodSeconds` (15): how often the metric is read and a decision made;
* `mode`: `auto` (the default) or `manual`: the controller still reads the metric every
  period and records it (`status.currentMetric`, `ScalingActive=False` with reason
  `ManualMode`) but decides nothing; if `manualReplicas` is set it scales the target to
  that count (within min/max). This is how `setpoint tune --autoscaler` drives the
  target. Back in `auto`, the history and the pid state start afresh from the current
  count (bumpless).

`status`: `currentReplicas`, `desiredReplicas`, `currentMetric` (the last value read),
`lastScaleTime`, `observedGeneration`, the HPA's conditions `AbleToScale`,
`ScalingActive` and `ScalingLimited` with its reasons, and `decisions`: the last 20
decisions that changed the replicas or wanted to (each with `time`, `metric`,
`current`, `recommendation`, `stabilized`, `limited`, `final`, `reason`), and
`lastDecision`: why the last period decided what it did, changed or not: the
`algorithm`, the observation (`metric`, `current`, `arrivals`), each term of the
algorithm (ratio: `ratio`; pid: `p`, `i`, `d`; predictive: `setpoint.control.predictive.Terms`,
its prediction among them), its `recommendation`, and `stabilized`, `limited`, `final`
as the behaviour made them (`describe` prints it in one line).

The controller runs on the reconciler kit (`setpoint.runtime.kit`): `observe` reads the
target's scale and (when the plan will use it, `wants_metric`) the metric; `plan`
(`setpoint.control.autoscaler_plan`) is pure (time is an argument): it lets
`setpoint.control.scaling.decide` decide and returns a frozen `Plan` holding the rescale,
the new status and conditions, the events and what to remember; `act` writes the scale
(compare-and-swap on the target's resourceVersion) and records its `SuccessfulRescale`;
if the target refuses, that is a fact the next look observes, and its plan says what then
(`refused`: a `FailedRescale` warning). The kit records the plan's events (the warnings
`FailedGetMetric`, `FailedGetScale`) and writes the status only if it changed.
A failure is reported once: its warning is recorded when its condition changes, so an
unreachable metric costs no write period after period. As the HPA, it
keeps the recommendation and scale-event history (and the pid algorithm's state) in
memory: a restarted controller starts them afresh from the current count. Time comes
from the manager's clock. The spec is read once, typed (`spec_of`): its defaults are the
schema's and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from setpoint.control.autoscaler_plan import (
    ABLE_TO_SCALE,
    MANUAL_MODE,
    MAX_DECISIONS,
    SCALING_ACTIVE,
    SCALING_LIMITED,
    ArrivalsSpecSchema,
    AutoscalerSpecSchema,
    AutoscalerStatusSchema,
    Memory,
    MetricSpecSchema,
    Observed,
    PidSpecSchema,
    Plan,
    Rescale,
    behavior_of,
    decision_summary,
    plan,
    refused,
    spec_of,
    wants_metric,
)
from setpoint.control.kinds import AUTOSCALER
from setpoint.control.metrics_source import (
    CommandSource,
    HttpJsonSource,
    MetricSource,
    MetricUnavailable,
    PrometheusSource,
    read_metric,
)
from setpoint.errors import Conflict, Invalid, NotFound
from setpoint.model import Kind, Object
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.kit import Acted, KindRules, KitReconciler
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request
from setpoint.runtime.run_as import UserPolicy, UserRefused, user_of
from setpoint.runtime.scale import read_scale, write_scale
from setpoint.store import Actor, WriteOptions

__all__ = [
    "ABLE_TO_SCALE",
    "AUTOSCALER",
    "MANUAL_MODE",
    "MAX_DECISIONS",
    "SCALING_ACTIVE",
    "SCALING_LIMITED",
    "AutoscalerController",
    "AutoscalerSettings",
    "AutoscalerSpecSchema",
    "AutoscalerStatusSchema",
    "Memory",
    "Observed",
    "PidSpecSchema",
    "Plan",
    "Rescale",
    "behavior_of",
    "decision_summary",
    "metric_source_of",
    "plan",
    "refused",
    "setup",
    "spec_of",
    "wants_metric",
]

log = logging.getLogger("setpoint.autoscaler")

SCALE_WRITES = WriteOptions(actor=Actor(manager="controller/autoscaler"))
"""How the controller writes a target's scale: naming itself, so that the timeline does not
take the rescale for a person's change."""


@dataclass(frozen=True, slots=True)
class AutoscalerSettings:
    """Whom command metrics may run as (`users`; default: `UserPolicy()`, the engine's own
    rule)."""

    users: UserPolicy = field(default_factory=UserPolicy)


def metric_source_of(metric: MetricSpecSchema | ArrivalsSpecSchema) -> MetricSource:
    """The `MetricSource` of an Autoscaler's `spec.metric` or `spec.arrivals` (the schema
    allows exactly one)."""
    if metric.http is not None:
        return HttpJsonSource(metric.http.url, metric.http.pointer)
    if metric.prometheus is not None:
        prom = metric.prometheus
        return PrometheusSource(prom.url, prom.name, dict(prom.labels))
    if metric.command is not None:
        return CommandSource(tuple(metric.command.args))
    raise Invalid("want exactly one of http, prometheus, command", field="spec.metric")


# -- the controller ----------------------------------------------------------------------


class AutoscalerController(KitReconciler[AutoscalerSpecSchema, Observed, Plan]):
    """Reconciles Autoscalers on the kit: one decision per `periodSeconds` (module
    docstring): `observe` reads the target's scale and the metric; `plan` decides; `act`
    writes the scale; the kit records the events and writes the status (if it changed)."""

    def __init__(
        self, manager: Manager, events: EventRecorder, users: UserPolicy | None = None
    ) -> None:
        self.manager = manager
        self.users = users or UserPolicy()
        self._memory: dict[tuple[str, str], Memory] = {}
        self._refused: dict[tuple[str, str], Observed] = {}
        """What a look saw whose rescale the target refused, the refusal added: the next
        look's observation."""
        self._seen: dict[tuple[str, str], Observed] = {}
        rules = KindRules(AUTOSCALER, spec_of, self.observe, plan, self.act, cleanup=self.forget)
        super().__init__(manager.store, rules, events, clock=manager.clock)

    async def observe(self, obj: Object, spec: AutoscalerSpecSchema) -> Observed:
        """Read the target's scale and, if the plan will use it, the metric (or, right after
        a refused rescale, what that look saw, and the refusal)."""
        key = _key(obj)
        if (again := self._refused.pop(key, None)) is not None:
            return again
        observed = await self._observe(obj, spec, self._memory.get(key))
        self._seen[key] = observed
        return observed

    async def _observe(
        self, obj: Object, spec: AutoscalerSpecSchema, memory: Memory | None
    ) -> Observed:
        meta = obj["metadata"]
        seen = Observed(
            str(meta.get("uid", "")),
            int(meta.get("generation", 1)),
            obj.get("status") or {},
            memory=memory,
            monotonic=self.clock.monotonic(),
        )
        ref = spec.scale_target_ref
        try:
            target_kind = self.store.registry.get(ref.api_version, ref.kind)
            scale = await read_scale(self.store, target_kind, ref.name, meta.get("namespace"))
        except (NotFound, Invalid) as exc:
            message = f"cannot read the scale of {ref.kind}/{ref.name}: {exc}"
            return replace(seen, scale_error=message)
        seen = replace(seen, scale=scale)
        if not wants_metric(spec, scale):
            return seen
        try:
            value = await self._read(spec.metric, target_kind, ref.name, meta)
        except MetricUnavailable as exc:
            return replace(seen, metric_error=str(exc))
        seen = replace(seen, metric=value)
        if spec.algorithm == "predictive" and spec.arrivals is not None and spec.mode == "auto":
            try:
                arrivals = await self._read(spec.arrivals, target_kind, ref.name, meta)
            except MetricUnavailable as exc:
                return replace(seen, arrivals_error=str(exc))
            seen = replace(seen, arrivals=arrivals)
        return seen

    async def _read(
        self,
        spec: MetricSpecSchema | ArrivalsSpecSchema,
        target_kind: Kind,
        name: str,
        meta: Mapping[str, Any],
    ) -> float:
        """The number `spec`'s source gives (`MetricUnavailable` if none)."""
        source = metric_source_of(spec)
        if isinstance(source, CommandSource):
            source = await self._command_as_target(source, target_kind, name, meta)
        return await read_metric(source, within=spec.timeout_seconds)

    async def _command_as_target(
        self, source: CommandSource, target_kind: Kind, name: str, meta: Mapping[str, Any]
    ) -> CommandSource:
        """`source` run as the target's children run (`user_of`: a Deployment's template
        `user:`; none: the engine's user), if this engine may (`UserPolicy`); else
        `MetricUnavailable` saying why. A command in an Autoscaler gets no more power than
        one in a Process of the same namespace: its author could write either."""
        try:
            target = await self.store.get(
                target_kind.api_version, target_kind.kind, name, meta.get("namespace")
            )
            account = self.users.account(user_of(target))
        except (NotFound, UserRefused) as exc:
            raise MetricUnavailable(f"command {source.args[0]!r}: {exc}") from None
        return replace(source, account=account)

    async def act(self, obj: Object, decided: Plan) -> Acted[Plan]:
        """Write the scale the plan says (and record its event); a target that refuses it
        makes the kit look again, the refusal observed. Remember what the plan says to."""
        key = _key(obj)
        rescale = decided.rescale
        if rescale is not None:
            ref = spec_of(obj).scale_target_ref
            namespace = obj["metadata"].get("namespace")
            try:
                await write_scale(
                    self.store,
                    self.store.registry.get(ref.api_version, ref.kind),
                    ref.name,
                    namespace,
                    rescale.replicas,
                    resource_version=rescale.resource_version,
                    options=SCALE_WRITES,  # the timeline names who rescaled, not `unknown`
                )
            except (Conflict, NotFound, Invalid) as exc:
                seen = self._seen.pop(key)
                self._refused[key] = replace(seen, rescale_error=str(exc))
                return Acted(obj, decided, again=True)
            log.info(
                "autoscaler %s/%s: %s scaled to %d (%s)",
                namespace,
                obj["metadata"]["name"],
                ref.name,
                rescale.replicas,
                rescale.reason,
            )
            assert self.events is not None
            for event in rescale.events:
                record = self.events.warning if event.warning else self.events.normal
                await record(obj, event.reason, event.message)
        self._seen.pop(key, None)
        if decided.memory is None:
            self._memory.pop(key, None)
        else:
            self._memory[key] = decided.memory
        return Acted(obj, decided)

    async def forget(self, request: Request) -> None:
        """The Autoscaler is gone (or being deleted): forget its decisions' memory."""
        self._memory.pop((request.namespace, request.name), None)


def _key(obj: Object) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def setup(manager: Manager, settings: AutoscalerSettings | None = None) -> Controller:
    """Add the Autoscaler controller to `manager`; return the controller. `settings.users`
    says whom command metrics may run as (default: `UserPolicy()`, the engine's own rule)."""
    users = (settings or AutoscalerSettings()).users
    reconciler = AutoscalerController(manager, manager.event_recorder("autoscaler"), users)
    return (
        manager.controller("autoscaler")
        .for_(AUTOSCALER, predicates=[generation_changed])
        .complete(reconciler)
    )
