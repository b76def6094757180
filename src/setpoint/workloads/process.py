"""The `Process` kind (setpoint.dev/v1alpha1, namespaced, short name `proc`) and its controller:
one supervised local command, kept running as its spec says.

`spec`: `args` (argv, required), `env` and `envFrom` (values may come from Secrets: see
`setpoint.workloads.secret`), `envFile` (see `setpoint.workloads.env_files`), `cwd`, `user`,
`ports` (informational),
`restartPolicy` (Always | OnFailure | Never), `backoff` (`initialSeconds`, `maxSeconds`,
`resetAfterSeconds`), `terminationGracePeriodSeconds`, `stopSignal` (e.g. SIGINT for
PostgreSQL's fast shutdown), `startupProbe` / `readinessProbe` / `livenessProbe` (see
`setpoint.workloads.probes`), `dependsOn` (see `setpoint.workloads.dependencies`) and
`suspend`.
Every default is the schema's (`ProcessSpecSchema`); the controller reads the spec
through it.

`status`: `phase` (Pending, Waiting, Starting, Running, Succeeded, Failed,
CrashLoopBackOff, Suspended), `pid`, `startTime`, `restarts`, `lastExit` (`ExitSchema`:
code, signal, reason, finishedAt, and `stoppedOnRequest` / `stopReason` when the controller
stopped it), `nextStartAt` while backing off, `observedGeneration`, `envFiles` (each env file
the running child read, as last seen: `path`, `digest`, a keyed HMAC that tells nothing of
the content, and of its last edit `changedKeys` and `changedAt`; the lifecycle looks at them
every `ENV_FILE_LOOK_SECONDS`, says an edit in an `EnvFileChanged` event, and does not
restart the child for it: it reads them at its next start; see
`setpoint.workloads.env_file_watch`), conditions `Started` and `Ready`
(plus `Stalled` when the command cannot be started at all: reason `StartFailed`, or
`SecretMissing` while a Secret it needs is missing), and two fields the controller keeps
for itself: `startedGeneration` (the spec generation the child
runs) and `recentRestarts` (restarts since the child last ran `resetAfterSeconds`; it sets
the back-off).

Decisions, made by the pure `plan(desired, observed, now)`, which returns the child action,
the whole new status and the events to emit:

* restart policy: Always restarts after any exit; OnFailure after a non-zero (or
  unknown) exit; Never does not. A finished process runs again when its spec changes.
* crash-loop back-off: the first restart is immediate; each further one within
  `resetAfterSeconds` of the previous start waits `initialSeconds`, doubling up
  to `maxSeconds` (phase CrashLoopBackOff, `nextStartAt`).
* a spec change (a new generation) restarts the child with the new spec.
* a restart request (the annotation `setpoint.dev/restartedAt`, set by `setpoint restart`,
  differs from `status.restartedAt`, the request the child was started under) stops a
  running child and starts it again, or starts a finished one, whatever the restart policy
  and the back-off: once per new value (the start records it). Not counted in `restarts`.
* deletion (the finalizer `setpoint.dev/process`) stops the child, then lets the
  object go.
* `suspend: true` (as a Kubernetes Job's; `setpoint stop` sets it, `setpoint start`
  clears it) stops a running child and starts none, whatever the restart policy, the
  dependencies or a restart request: phase Suspended, `Ready=False` reason `Suspended`.
  Clearing it is a spec change: the child starts again (once its dependencies hold).
* a child the plan stops (deletion, a spec change, a failed liveness probe) is
  `Ready=False` *before* its stop signal is sent (reason `Terminating`, `Restarting` or
  `Stopping`, the stop's reason as message; its phase, pid and `observedGeneration`
  unchanged until it has exited), as
  Kubernetes takes a terminating pod out of its endpoints first: dependents and
  Services stop counting on a process that is shutting down.
* dependencies: a process whose `dependsOn` does not hold is not started (phase
  Waiting, `Ready=False`, reason `WaitingForDependency` naming it). A process
  already running when a dependency stops holding is *kept running* (stopping it
  would turn one failure into many, and it heals by itself when the dependency
  does) but reports `Ready=False`, reason `DependencyNotReady`, naming it.
* a liveness (or startup) probe failure stops the child, which then restarts as
  after a crash (restart policy and back-off apply); readiness only moves `Ready`.
* a start that fails: for a reason of the spec (no such command, no such directory) the
  Process is Failed and `Stalled` (reason `StartFailed`) until its spec changes; for a
  reason of the machine (an OS error: no space, no file descriptors, an unwritable state
  or log directory) or of an `envFile` (missing, unreadable, malformed) it stays Pending,
  `Ready=False` with reason `StartFailed` and the error, and is retried with back-off;
  for want of a Secret (one it refers to, or a key of it, is missing: `SecretMissing`; a
  value holds a NUL byte: `SecretInvalid`) it stays Pending and `Stalled` with that
  reason until the Secret changes, and is tried again then.
* a `user:` this engine may not run commands as (`setpoint.runtime.run_as.UserPolicy`: an
  engine that is not root cannot switch users; a root engine started with an allow-list
  runs only the users on it) starts nothing: the Process is Pending and `Stalled` (reason
  `UserNotAllowed`, or `UserUnknown` for no such user), reported once, until its spec or
  the engine's allow-list changes. A child of an earlier spec keeps running: a refused
  change of `user:` is not carried out (a child of the refused spec itself, adopted by an
  engine that allows fewer users, is stopped).

`ProcessController` (wired by `setup`) is a `ChildLifecycle` (`setpoint.workloads.children`,
shared with the Job controller): it observes the child (exits are learnt from the
supervisor and enqueue the object at once; children an earlier engine left running are
re-adopted, keeping the startup and readiness their status records until a probe says
otherwise; children whose objects are gone are stopped), runs the child's probes (an
exec probe as the child runs: as its user, with its environment and working directory; a
`logLine` readiness probe reads the child's log from where its run began, every
`LOG_LINE_LOOK_SECONDS`, until a line matches: then it is Ready for the rest of the run,
and an adopted child recorded Ready is not read again), and carries out the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Mapping
from typing import Any, TypeAlias

from setpoint.errors import Conflict, Error
from setpoint.model.conditions import READY, set_condition
from setpoint.model.redaction import redact
from setpoint.model.wellknown import PROCESS_FINALIZER
from setpoint.runtime.controller import Controller
from setpoint.runtime.manager import Manager
from setpoint.runtime.run_as import UserRefused, command_environment
from setpoint.workloads import supervisor
from setpoint.workloads.child_facts import ChildFacts, ChildKind, Key, Supervised, observed_fields
from setpoint.workloads.child_plan import LAST_LINE_CHARS, Action
from setpoint.workloads.children import ChildLifecycle, ChildSettings, StopTurns, controller_of
from setpoint.workloads.kinds import PROCESS
from setpoint.workloads.probes import (
    LogLineScanner,
    Probe,
    Prober,
    ProbeResult,
    ProbeRole,
    ProbeRunner,
    run_probe,
)
from setpoint.workloads.process_plan import (
    STARTED,
    CrashLoopBackoffSchema,
    Desired,
    Observed,
    Plan,
    ProcessSpecSchema,
    ProcessStatusSchema,
    RecordedProbes,
    desired_of,
    plan,
    recorded_probes,
)

__all__ = [
    "FINALIZER",
    "PROCESS",
    "STARTED",
    "Action",
    "CrashLoopBackoffSchema",
    "Desired",
    "Observed",
    "Plan",
    "ProcessController",
    "ProcessSettings",
    "ProcessSpecSchema",
    "ProcessStatusSchema",
    "RecordedProbes",
    "desired_of",
    "observe",
    "plan",
    "recorded_probes",
    "setup",
]

FINALIZER = PROCESS_FINALIZER
MAX_CONCURRENT = 16
"""Processes reconciled at once (one key is never reconciled by two workers)."""
LOG_LINE_LOOK_SECONDS = 0.25
"""How often a `logLine` readiness probe reads the child's new output."""


def observe(
    status: Mapping[str, Any], facts: ChildFacts, unmet: str | None, now: float
) -> Observed:
    """The `Observed` of a Process from its stored status, what the lifecycle knows of its
    child, and its first unmet dependency. Pure."""
    child = facts.child
    counts = ProcessStatusSchema.model_validate(status)
    common = observed_fields(status, facts, unmet, now)
    common.update(restarts=counts.restarts, recent_restarts=counts.recent_restarts)
    if not facts.running or child is None:
        return Observed(**common)
    return Observed(
        **common,
        started_at=child.handle.started_at,
        started=child.started,
        readiness=child.readiness,
        probe_message=child.probe_message,
        unhealthy=child.unhealthy,
    )


# -- the controller -------------------------------------------------------------------


ProcessSettings: TypeAlias = ChildSettings
"""Where children's state files (`state_dir`) and logs (`log_dir`) live."""


class ProcessController(ChildLifecycle[ProcessSpecSchema, Plan]):
    """Keeps each Process's child running as its spec says (see the module docstring).

    `reconcile(request)` is the one entry point; `setup` wires it, so that exits and probe
    results enqueue the object.
    """

    child_kind = ChildKind(PROCESS, FINALIZER, ProcessSpecSchema, observe, plan)

    # -- probes ----------------------------------------------------------------------

    def follow(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        recorded: Mapping[str, Any] | None,
    ) -> None:
        """Run the child's probes: the startup probe first, if there is one. An adopted child
        keeps what its stored status says of its probes (`recorded_probes`) until a probe
        says otherwise, as the kubelet keeps a running container's across its restart:
        an engine restart neither makes it unready nor re-runs a startup probe it passed."""
        recorded_state = None if recorded is None else recorded_probes(recorded)
        child.started = spec.startup_probe is None or (
            recorded_state is not None and recorded_state.started
        )
        if not child.started:
            assert spec.startup_probe is not None
            self._probe(key, child, spec, "startup", spec.startup_probe)
        else:
            self._probe_health(key, child, spec, recorded_state)

    def _probe_health(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        recorded: RecordedProbes | None = None,
    ) -> None:
        probe = spec.readiness_probe
        if probe is not None:
            child.readiness, child.probe_message = "Unknown", ""
            if recorded is not None:
                child.readiness, child.probe_message = recorded.readiness, recorded.message
            if probe.log_line is None:
                self._probe(key, child, spec, "readiness", probe)
            elif child.readiness != "Success":  # once matched, Ready for the rest of the run
                task = self._follow_log_line(key, child, spec, probe.log_line.pattern)
                child.tasks.append(asyncio.create_task(task, name=f"logLine probe of {key}"))
        if spec.liveness_probe is not None:
            self._probe(key, child, spec, "liveness", spec.liveness_probe)

    def _probe(
        self, key: Key, child: Supervised, spec: ProcessSpecSchema, role: ProbeRole, probe: Probe
    ) -> None:
        on_change = functools.partial(self._on_probe, key, child, spec, role)
        # An exec probe runs as the child does: as its user, with its environment (the
        # same base, its env, envFrom and envFile resolved) and its working directory; and
        # never as a user this engine may not use (a spec changed while no engine ran).
        runner: ProbeRunner
        try:
            account = self.settings.users.account(spec.user)
        except UserRefused as exc:
            runner = functools.partial(_cannot_run, str(exc))
        else:
            env = command_environment(account, child.env)
            runner = functools.partial(run_probe, env=env, cwd=spec.cwd, account=account)
        prober = Prober(probe, self.clock, on_change, runner=runner)
        child.tasks.append(asyncio.create_task(prober.run(), name=f"{role} probe of {key}"))

    async def _follow_log_line(
        self, key: Key, child: Supervised, spec: ProcessSpecSchema, pattern: str
    ) -> None:
        """Look at the child's output every `LOG_LINE_LOOK_SECONDS`, from where its run
        began (also for a child adopted from an earlier engine), until a line matches
        `pattern`: then it is Ready (`ReadinessProbeSucceeded`, the line as message) until
        it next starts."""
        start = child.handle.log_start
        if start is not None:
            scanner = LogLineScanner(pattern, start.path, start.backups, start.inode, start.offset)
        else:  # an earlier version's child: from its output to come
            path = self.log_dir / f"{child.handle.name}.log"
            scanner = LogLineScanner(pattern, path, supervisor.DEFAULT_LOG_BACKUPS, None)
        while (line := scanner.look()) is None:
            await self.clock.sleep(LOG_LINE_LOOK_SECONDS)
        message = f"matched: {line.strip()[:LAST_LINE_CHARS]}"
        await self._on_probe(key, child, spec, "readiness", "Success", message)

    async def _on_probe(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        role: ProbeRole,
        result: ProbeResult,
        message: str,
    ) -> None:
        if self._table.get(key) is not child or not child.running:
            return
        message = redact(message, child.secret_values)  # an exec probe's output, quoted
        if role == "startup":
            if result == "Success":
                child.started = True
                self._probe_health(key, child, spec)
            elif result == "Failure":
                child.unhealthy = f"startup probe failed: {message}"
        elif role == "liveness" and result == "Failure":
            child.unhealthy = f"liveness probe failed: {message}"
        elif role == "readiness":
            child.readiness = result
            child.probe_message = message
        if result == "Failure":
            await self.events.warning(child.ref, "Unhealthy", f"{role} probe failed: {message}")
        self._wake(key)

    # -- whole-table operations ----------------------------------------------------------

    async def stop_all(self, grace: float | None = None, turns: StopTurns | None = None) -> None:
        """Stop every child this controller supervises (for a full shutdown; each when
        `turns` says), and record in each status that it was stopped with the engine, so the
        next engine starts it afresh (no restart counted, no back-off) rather than as a child
        that died unseen."""
        for namespace, name in await self._stop_children(grace, turns):
            with contextlib.suppress(Error):
                await self._mark_stopped(namespace, name)

    async def _mark_stopped(self, namespace: str, name: str) -> None:
        for _ in range(3):
            obj = await self.store.get(PROCESS.api_version, PROCESS.kind, name, namespace)
            status = dict(obj.get("status") or {})
            for field_ in ("pid", "startTime", "startedGeneration", "lastExit", "nextStartAt"):
                status.pop(field_, None)
            status["phase"] = "Pending"
            status["recentRestarts"] = 0
            now = self.clock.now()
            for type_ in (STARTED, READY):
                set_condition(status, type_, False, reason="EngineStopped",
                              message="stopped with the engine", now=now)  # fmt: skip
            obj["status"] = status
            try:
                await self.store.update_status(obj)
                return
            except Conflict:
                continue


async def _cannot_run(message: str, probe: Probe) -> tuple[bool, str]:
    """A probe runner for a probe that cannot be run (`message` says why): it fails."""
    return False, message


def setup(manager: Manager, settings: ProcessSettings) -> Controller:
    """Add the Process controller to `manager`; return the controller (its `reconciler` is
    the `ProcessController`, which stops every child on shutdown). `settings.state_dir`
    keeps one state file per child (for re-adoption after a restart): give each kind a
    directory of its own, since a controller treats every state file in its directory as
    one of its own children. `settings.log_dir` takes the children's output."""
    return controller_of(manager, ProcessController, settings)
