"""The child lifecycle that the Process and Job controllers share: one component, two kinds.

A Process and a Job each supervise one local child (a Job's child is its current attempt).
What their plans are made of (the command's spec fields, back-off, the exit record, the
plan's inputs and `ChildPlan`) is pure and lives in `setpoint.workloads.child_plan`; what
the lifecycle knows of a child (the table's `Supervised`, one look's `ChildFacts`) and
`ChildKind` live in `setpoint.workloads.child_facts`; what carries a plan out lives here,
once:

* `ChildLifecycle`, the base of both controllers, made a Process or a Job controller by a
  `ChildKind` (the kind, its finalizer and spec schema, its pure `observe` and `plan`).
  It runs on the reconciler kit (`setpoint.runtime.kit`), which reads the object, keeps
  the finalizer on while a child is in the table, records the plan's events, writes its
  status (only when it differs from the stored one; `Stalled` from the plan's stall) and
  requeues for a plan that waits. The lifecycle's `observe` looks at the child (in the
  table, adopted from an earlier engine, or gone while no engine watched it:
  `ChildFacts`) and the dependencies; its `act` carries the child action out: stop (the
  plan's status, `Ready=False` with reason `Terminating`, `Restarting` or `Stopping`,
  written *before* the stop signal, so that dependents and Services stop counting on a
  child that is shutting down; then look again, so the exit is recorded by the next
  plan), or start. `controller_of` makes and wires it (each kind's `setup` calls it); it collects
  orphans and stops (each when a `StopTurns`, the engine's stop order, says) or detaches
  every child. A restart request (the annotation `setpoint restart` sets:
  `ChildDesired.restarted_at`) reaches the kind's plan, which treats it as a new run;
  each start records it.

Before each plan it asks the controller's `UserPolicy` (`ChildSettings.users`,
`setpoint.runtime.run_as`) whether the spec's `user:` may be run: a refusal is a fact
(`ChildFacts.refused`) the kind's plan turns into a `Stalled` object that starts nothing.

The kinds decide; this module decides nothing about restart policies, retries or
conditions. It only does what a plan says, and reports what happened when it did it
(the pid of a started child; a start that failed). How a start fails matters: a spec
the supervisor refuses (`Invalid`: no such command, no such directory) fails until the spec
changes; an OS failure (no space, no file descriptors, an unwritable state or log
directory, a failed mkfifo) is transient and retried with `ENVIRONMENT_BACKOFF`, and so is
an `envFile` that cannot be read or parsed (`EnvFileUnavailable`); a Secret
the spec needs that is missing (or holds a value an environment cannot) fails until a
Secret changes: the lifecycle watches the Secrets its objects refer to, and tries such a
start again at each reconcile.

The environment: a child's `envFile`s are read (`setpoint.workloads.env_files`), and its
`envFrom` and `env` resolved (`setpoint.workloads.secret`), when it starts, each later one
winning; and again, best effort, when an earlier engine's child is adopted. The child keeps
its environment (`Supervised.env`, for exec probes, which run with it as the child's user)
and the values that came from Secrets (`Supervised.secret_values`), which are masked in
the output line its exit reason quotes (and, by the Process controller, in exec probe
output). Values from env files are not
masked: which of them are secret is not known, and masking every one would mask common
words everywhere; a secret belongs in a Secret. A child with `resources.limits.memory` is
watched by `setpoint.workloads.memory`; killed over it, its exit says `OOMKilled`. A child
with `envFile`s has them looked at every `ENV_FILE_LOOK_SECONDS`
(`setpoint.workloads.env_file_watch`, its digests keyed by the controller's private
`envfile.key` in `state_dir`): an edit goes to `status.envFiles` and an `EnvFileChanged`
event, and nothing is restarted for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, EnvFileUnavailable, Invalid, NotFound, UnknownKind
from setpoint.model import Kind, Object
from setpoint.model.quantities import parse_bytes
from setpoint.model.redaction import redact
from setpoint.model.wellknown import child_name
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.kit import Acted, KindRules, KitReconciler
from setpoint.runtime.manager import Manager
from setpoint.runtime.plan import timestamp
from setpoint.runtime.predicates import annotations_changed, generation_changed, or_
from setpoint.runtime.reconciler import Request, Result
from setpoint.runtime.run_as import UserPolicy, UserRefused
from setpoint.store import Store
from setpoint.workloads import supervisor
from setpoint.workloads.child_facts import (
    ChildFacts,
    ChildKind,
    Key,
    P,
    S,
    Supervised,
)
from setpoint.workloads.child_plan import (
    LAST_LINE_CHARS,
    LOST_REASON,
    Action,
    ChildDesired,
    ChildExit,
    StartFailure,
)
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    dependency_keys,
    dependents_of,
    unmet_in_store,
)
from setpoint.workloads.env_file_watch import DigestKey, EnvFileWatch, recorded_env_files
from setpoint.workloads.env_files import read_env_files
from setpoint.workloads.memory import OOM_KILLED, MemoryWatch
from setpoint.workloads.secret import (
    SECRET,
    SECRETS_INDEX,
    ResolvedEnv,
    SecretUnavailable,
    referring_to,
    resolve_env_in_store,
    secret_keys,
)

__all__ = ["ChildLifecycle", "ChildSettings", "StopTurns", "controller_of"]

log = logging.getLogger("setpoint.workloads")


class StopTurns(Protocol):
    """When each child may stop in a full shutdown, across controllers (the engine's
    order: dependents before their dependencies, `setpoint.engine.shutdown`)."""

    async def wait_turn(self, kind: str, key: Key) -> None:
        """Return once the children to stop before this one have stopped."""

    def stopped(self, kind: str, key: Key) -> None:
        """This one has stopped (or failed to: it no longer holds anyone up)."""


@dataclass(frozen=True, slots=True)
class ChildSettings:
    """Where children's state files (`state_dir`) and logs (`log_dir`) live, and which
    users they may run as (`users`; default: the engine's own, any when it is root)."""

    state_dir: Path
    log_dir: Path
    users: UserPolicy = field(default_factory=UserPolicy)


def _key(obj: Object) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def controller_of(
    manager: Manager, lifecycle_type: type[ChildLifecycle[Any, Any]], settings: ChildSettings
) -> Controller:
    """Make a `lifecycle_type` on `manager`'s store and clock with `settings` (its events
    reported as `<kind>-controller`) and wire it into `manager` (what each kind's `setup`
    does): its controller, the `dependsOn` and Secrets indexes, the watches of the
    Processes, Jobs and Deployments an object may depend on and of the Secrets it refers to
    (one that appears starts the children waiting for it), and the orphan collector; return
    the controller. Its own kind's changes count when the generation or the annotations
    change (a restart request is an annotation)."""
    kind = lifecycle_type.child_kind.kind
    events = manager.event_recorder(f"{kind.singular}-controller")
    lifecycle = lifecycle_type(manager.store, events, settings, clock=manager.clock)
    cache = manager.cache(kind)
    cache.add_index(DEPENDS_ON_INDEX, dependency_keys)
    cache.add_index(SECRETS_INDEX, secret_keys)
    builder = (
        manager.controller(kind.singular)
        .for_(kind, predicates=[or_(generation_changed, annotations_changed)])
        .max_concurrent(MAX_CONCURRENT)  # one child's slow stop must not hold up the rest
    )
    for name in DEPENDABLE_KINDS:
        with contextlib.suppress(UnknownKind):  # a kind that is not registered here
            watched = manager.store.registry.get(kind.api_version, name)
            builder.watches(watched, dependents_of(cache))
    with contextlib.suppress(UnknownKind):  # a registry without Secrets
        secrets = manager.store.registry.get(SECRET.api_version, SECRET.kind)
        builder.watches(secrets, referring_to(cache))
    lifecycle.controller = builder.complete(lifecycle)
    lifecycle.controller.on_lost = lifecycle.release
    manager.add_runnable(lifecycle.collect_orphans)
    return lifecycle.controller


MAX_CONCURRENT = 16
"""Objects of one kind reconciled at once (one key is never reconciled by two workers)."""
ENV_FILE_LOOK_SECONDS = 1.0
"""How often a running child's env files are looked at for edits."""
LOGS_AFTER_EXIT_SECONDS = 1.0
"""How long an exit waits for the child's last output to reach its log file."""
DEPENDABLE_KINDS = ("Process", "Job", "Deployment", "Service")
"""The kinds (of the object's own apiVersion) whose changes wake their dependents (the
Process, Job and Deployment controllers watch them all)."""


class ChildLifecycle(KitReconciler[ChildDesired[S], Any, P]):
    """The base of the Process and Job controllers: the table of children, and the kind's
    `act` on the reconciler kit (see the module docstring).

    Subclasses set `child_kind` (the kind, its finalizer, spec schema, and pure `observe`
    and `plan`), and may override `follow` (to run probes on a child). The kind's `setup`
    wires it (`controller_of`), so that exits enqueue the object.
    """

    child_kind: ChildKind[S, Any, P]

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        settings: ChildSettings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        kind = self.child_kind
        rules = KindRules(
            kind.kind,
            self.desired,
            self.observe,
            kind.plan,
            self.act,
            cleanup=self.forget,
            finalizer=kind.finalizer,
            holds=self.holds,
        )
        super().__init__(store, rules, events, clock=clock)
        self.events: EventRecorder = events
        self.settings = settings
        self.state_dir = Path(settings.state_dir)
        self.log_dir = Path(settings.log_dir)
        self.controller: Controller | None = None
        self._table: dict[Key, Supervised] = {}
        self._failures: dict[Key, StartFailure] = {}
        self._looked: dict[Key, tuple[S, ChildFacts]] = {}
        """What this reconcile's `observe` saw of each key's child, for its `act`."""
        self._orphans_collected = asyncio.Event()
        self._stopping: list[Supervised] = []
        self._detached = False
        """Set by `detach`: the children are left to the next engine, none adopted again."""
        self._kill_now = False
        self._digest_key: DigestKey | None = None
        """The key of env files' digests (`DigestKey`), read from `state_dir` when needed."""

    @property
    def kind(self) -> Kind:
        """The kind this controller keeps true to its spec."""
        return self.child_kind.kind

    def follow(
        self, key: Key, child: Supervised, spec: S, recorded: Mapping[str, Any] | None
    ) -> None:
        """Start watching a child that was just started (`recorded` None) or adopted
        (`recorded`: the stored status, what an earlier engine saw of it). Its exit is
        watched already; by default nothing more."""

    # -- the kit's steps -------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        """The kit's loop (`KitReconciler.reconcile`); a start that waits for a Secret is
        tried again at each reconcile."""
        key = (request.namespace, request.name)
        failure = self._failures.get(key)
        if failure is not None and failure.secret_reason is not None:
            del self._failures[key]  # waiting for a Secret: each reconcile tries again
        try:
            return await super().reconcile(request)
        finally:
            self._looked.pop(key, None)

    def desired(self, obj: Object) -> ChildDesired[S]:
        """What the object asks for, its spec read through the kind's schema."""
        return ChildDesired.of(obj, self.child_kind.spec_schema)

    async def observe(self, obj: Object, desired: ChildDesired[S]) -> Any:
        """The child (in the table, adopted from an earlier engine, or gone while no engine
        watched it), the first unmet dependency and whether the spec's `user:` is allowed,
        as the kind's pure `observe` makes them the plan's input."""
        key = _key(obj)
        facts = await self._facts(key, obj)
        unmet = await unmet_in_store(self.store, obj)
        try:
            self.settings.users.account(desired.spec.user)
        except UserRefused as exc:
            facts = dataclasses.replace(facts, refused=(exc.condition_reason, str(exc)))
        self._looked[key] = (desired.spec, facts)
        kind = self.child_kind
        return kind.observe(obj.get("status") or {}, facts, unmet, self.clock.now())

    async def act(self, obj: Object, step: P) -> Acted[P]:
        """Carry the child action out: a stop writes the plan's status (not ready any more)
        before the stop signal, then looks again, so that the same reconcile records the exit
        and (if the plan says so) starts the next child; a start that fails looks again too
        (the failure is a fact now: the plan says what it means). Otherwise write the plan's
        status (with a started child's `pid` and `startTime`) and forget a child whose end
        it records."""
        key = _key(obj)
        spec, facts = self._looked.pop(key)
        if step.action is not Action.NOTHING:
            log.info("%s %s/%s: %s (%s)", self.kind.singular, *key, step.action, step.reason)
        if step.action in (Action.STOP, Action.RESTART) and facts.running:
            assert facts.child is not None
            if step.status is not None:  # not ready any more, before the stop signal
                written = await self.write_status(obj, step.status)
                if written is None:  # deleted behind the finalizer's back
                    self._table.pop(key, None)
                    await self._stop(facts.child, 0.0)
                    return Acted(None, step)
                obj = written
            await self._stop(facts.child, None, because=step.reason)
            return Acted(obj, step, again=True)
        if step.action is Action.START and not await self._start(key, obj, spec):
            return Acted(obj, step, again=True)
        child = self._table.get(key)
        if step.status is not None:
            status = dict(step.status)
            if child is not None and step.action is Action.START:
                status["pid"] = child.handle.pid
                status.setdefault("startTime", timestamp(child.handle.started_at))
                step = dataclasses.replace(step, status=status)
            written = await self.write_status(obj, status, step.stall)
            if written is None:
                return Acted(None, step)
            obj = written
        if child is not None and child is facts.child and facts.ended is not None:
            self._table.pop(key, None)  # its end is in the stored status now
            await self._cleanup(child)
        return Acted(obj, step)

    def holds(self, request: Request) -> bool:
        """Whether a child of the object is in the table (its finalizer stays on till not)."""
        return (request.namespace, request.name) in self._table

    async def forget(self, request: Request) -> None:
        """The object is gone (deleted behind the finalizer's back): stop its child now."""
        key = (request.namespace, request.name)
        self._failures.pop(key, None)
        child = self._table.pop(key, None)
        if child is not None:
            await self._stop(child, 0.0)

    # -- observe -------------------------------------------------------------------------

    async def _facts(self, key: Key, obj: Object) -> ChildFacts:
        """The child in the table, else one adopted from an earlier engine; how a child
        ended that the status does not record yet."""
        status = obj.get("status") or {}
        child = self._table.get(key) or await self._adopt(key, obj)
        failure = self._failures.get(key)
        if child is None:
            if status.get("pid") is None:
                return ChildFacts(start_failure=failure)
            lost = ChildExit(None, None, LOST_REASON, self.clock.now())
            return ChildFacts(ended=lost, start_failure=failure)
        if child.running:
            return ChildFacts(child, start_failure=failure)
        return ChildFacts(child, self._ended(child), failure)

    def _ended(self, child: Supervised) -> ChildExit:
        """How `child` ended. One that failed by itself (a non-zero code, or a signal nobody
        sent) has the last line of its output added to the reason, as Kubernetes'
        `FallbackToLogsOnError` termination message: `exited with code 2: initdb: not
        found` says at once what `exited with code 2` makes one go and look for. The
        child's `secret_values` are masked in that line."""
        exit_ = child.exit or supervisor.Exit(None, None, "stopped")
        reason = exit_.reason
        failed = exit_.code not in (0, None) or exit_.signal is not None
        message = None
        watch = child.memory
        if watch is not None and watch.killed_at is not None and child.stop_reason is None:
            reason = OOM_KILLED  # as Kubernetes says it, the figures in the message
            message = watch.verdict()
        elif failed and child.stop_reason is None:
            line = supervisor.last_line(self.log_dir / f"{child.handle.name}.log")
            if line:
                reason = f"{reason}: {redact(line, child.secret_values)[:LAST_LINE_CHARS]}"
        finished = child.finished_at if child.finished_at is not None else self.clock.now()
        return ChildExit(
            exit_.code,
            exit_.signal,
            reason,
            finished,
            child.handle.started_at,
            child.stop_reason,
            child.handle.pid,
            message,
        )

    # -- apply ---------------------------------------------------------------------------

    def _new_child(
        self,
        key: Key,
        obj: Object,
        spec: S,
        handle: supervisor.Running | supervisor.Adopted,
        resolved: ResolvedEnv,
    ) -> Supervised:
        meta = obj["metadata"]
        generation = int(meta.get("generation", 1))
        if isinstance(handle, supervisor.Adopted):
            generation = int((obj.get("status") or {}).get("startedGeneration") or generation)
        child = Supervised(
            handle,
            generation,
            grace=spec.termination_grace_period_seconds,
            stop_signal=signal.Signals[spec.stop_signal],
            ref={
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if meta.get(k)},
            },
            env=resolved.env,
            secret_values=resolved.secret_values,
        )
        self._table[key] = child
        child.tasks.append(asyncio.create_task(self._wait_exit(key, child)))
        if spec.resources.limits.memory is not None:
            limit = parse_bytes(spec.resources.limits.memory)
            child.memory = MemoryWatch(handle, limit, self.clock)
            child.tasks.append(asyncio.create_task(self._limit_memory(child, child.memory)))
        if spec.env_file:
            self._watch_env_files(key, obj, child, spec.env_file)
        adopted = isinstance(handle, supervisor.Adopted)
        self.follow(key, child, spec, (obj.get("status") or {}) if adopted else None)
        return child

    def _watch_env_files(self, key: Key, obj: Object, child: Supervised, paths: list[str]) -> None:
        """Watch the child's env files, from what the stored status last saw of them (an
        edit made while the child was down, or no engine ran, is noticed at once)."""
        if self._digest_key is None:
            self._digest_key = DigestKey.load(self.state_dir)
        recorded = recorded_env_files(obj.get("status") or {})
        watch = EnvFileWatch(paths, os.environ, recorded, self._digest_key)
        first = {p: seen.changed_at for p, seen in recorded.items()}
        watch.look(self.clock.now())
        child.env_files = watch
        task = asyncio.create_task(self._look_at_env_files(key, child, watch, first))
        child.tasks.append(task)

    async def _look_at_env_files(
        self,
        key: Key,
        child: Supervised,
        watch: EnvFileWatch,
        said: Mapping[str, float | None],
    ) -> None:
        """Look at the child's env files every `ENV_FILE_LOOK_SECONDS` (the first look is
        made: the status is to say what it read); an edit is said in an `EnvFileChanged`
        event (`said`: the edits the status already told), then written to the status (the
        recorder makes it a change of this object). The child runs on as it is: it reads
        the files at its next start."""
        told = dict(said)
        changed = True
        while True:
            if changed:
                for seen in watch.items():
                    if seen.changed_at is not None and seen.changed_at != told.get(seen.path):
                        told[seen.path] = seen.changed_at
                        keys = ", ".join(seen.changed_keys) or "content"
                        message = f"envFile {seen.path} changed ({keys}); read at the next start"
                        await self.events.normal(child.ref, "EnvFileChanged", message)
                self._wake(key)
            await self.clock.sleep(ENV_FILE_LOOK_SECONDS)
            changed = watch.look(self.clock.now())

    async def _adopt(self, key: Key, obj: Object) -> Supervised | None:
        """The child an earlier engine left running for this object, if provably ours. Its
        environment is resolved again, best effort (its Secrets as they are now: for its exec
        probes and the values to mask)."""
        name = child_name(*key)
        handle = supervisor.find_adoptable(name, self.state_dir)
        if handle is None:
            supervisor.stray(name, self.state_dir)
            return None
        spec = self.child_kind.spec_schema.model_validate(obj["spec"])
        resolved = await self._environment(obj, spec, best_effort=True)
        log.info("%s %s/%s: adopted pid %d", self.kind.singular, key[0], key[1], handle.pid)
        return self._new_child(key, obj, spec, handle, resolved)

    async def _adopt_left_behind(self) -> None:
        """Adopt the children an earlier engine left that no reconcile has looked at yet (a
        stop soon after start), so that stopping every child stops them too."""
        for path in sorted(self.state_dir.glob("*.json")):
            namespace, _, name = path.stem.partition("_")
            key = (namespace, name)
            if key in self._table:
                continue
            try:
                obj = await self.store.get(
                    self.kind.api_version, self.kind.kind, name, namespace or None
                )
            except (NotFound, Invalid):
                continue  # not this kind's, or its object is gone: the orphan collector's
            await self._adopt(key, obj)

    async def _environment(self, obj: Object, spec: S, *, best_effort: bool = False) -> ResolvedEnv:
        """A child's environment: its `envFile`s read now, then `envFrom` and `env` (Secrets'
        values as the store has them now), a later one winning. With `best_effort` (a child
        that already runs), what cannot be read is left out rather than raised."""
        resolved = await resolve_env_in_store(self.store, obj, best_effort=best_effort)
        try:
            from_files = read_env_files(spec.env_file, os.environ)
        except EnvFileUnavailable:
            if not best_effort:
                raise
            from_files = {}
        return dataclasses.replace(resolved, env={**from_files, **resolved.env})

    async def _start(self, key: Key, obj: Object, spec: S) -> bool:
        """Start the object's child, its environment resolved (Secrets' values as the store
        has them now); on failure record a `StartFailure` and return False."""
        stale = self._table.pop(key, None)
        if stale is not None:
            await self._cleanup(stale)
        name = child_name(*key)
        generation = int(obj["metadata"].get("generation", 1))
        try:
            resolved = await self._environment(obj, spec)
            process_spec = supervisor.ProcessSpec(
                args=spec.args,
                log_dir=self.log_dir,
                marker=f"{self.child_kind.finalizer}:{obj['metadata'].get('uid', '')}",
                env=resolved.env,
                cwd=None if spec.cwd is None else Path(spec.cwd),
                user=spec.user,
            )
            handle = await supervisor.start(name, process_spec, self.state_dir, clock=self.clock)
        except SecretUnavailable as exc:
            await self._start_failed(
                key,
                obj,
                str(exc),
                transient=False,
                generation=generation,
                secret_reason=exc.condition_reason,
            )
            return False
        except Invalid as exc:
            await self._start_failed(key, obj, str(exc), transient=False, generation=generation)
            return False
        except EnvFileUnavailable as exc:  # the file has to change, not the spec: retried
            await self._start_failed(key, obj, str(exc), transient=True, generation=generation)
            return False
        except (OSError, AlreadyExists) as exc:
            message = f"cannot start {name}: {exc}"
            await self._start_failed(key, obj, message, transient=True, generation=generation)
            return False
        self._failures.pop(key, None)
        self._new_child(key, obj, spec, handle, resolved)
        await self.events.normal(obj, "Started", f"started pid {handle.pid}: {spec.args[0]}")
        return True

    async def _start_failed(
        self,
        key: Key,
        obj: Object,
        message: str,
        *,
        transient: bool,
        generation: int,
        secret_reason: str | None = None,
    ) -> None:
        earlier = self._failures.get(key)
        count = 1 if earlier is None else earlier.count + 1
        self._failures[key] = StartFailure(
            message, transient, generation, count, self.clock.now(), secret_reason
        )
        await self.events.warning(obj, "FailedStart", message)

    async def _limit_memory(self, child: Supervised, watch: MemoryWatch) -> None:
        """Kill the child once its group holds more than its memory limit, and say so (the
        event is not cancelled with the child's tasks when its exit is seen)."""
        await watch.run()
        message = f"{watch.verdict()}: killed pid {child.handle.pid} and its group"
        await asyncio.shield(self.events.warning(child.ref, "OOMKilling", message))

    async def _wait_exit(self, key: Key, child: Supervised) -> None:
        exit_ = await child.handle.wait()
        # Its last lines reach the log through its holder a moment after it ended: the exit
        # reason quotes them, and the timeline reads them when the exit is recorded. (A
        # daemonized grandchild may keep the pipe open: then do not wait for long.)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(child.handle.wait_logs_closed(), LOGS_AFTER_EXIT_SECONDS)
        child.exit = exit_
        child.finished_at = self.clock.now()
        for task in child.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        if self._table.get(key) is child:
            self._wake(key)

    def _wake(self, key: Key) -> None:
        if self.controller is not None:
            self.controller.enqueue(Request(key[1], key[0]))

    async def _stop(self, child: Supervised, grace: float | None, because: str = "") -> None:
        """Stop `child` with its stop signal, SIGKILL after `grace` (None: its own)."""
        child.cancel_tasks()
        grace = child.grace if grace is None else grace
        exit_ = await supervisor.stop(child.handle, grace, child.stop_signal)
        child.cleaned = True
        if child.exit is None:
            child.exit = exit_
            child.finished_at = self.clock.now()
            child.stop_reason = because or "stopped"

    async def _cleanup(self, child: Supervised) -> None:
        """Clear up after a child that exited by itself (its group, state file, logs)."""
        child.cancel_tasks()
        if not child.cleaned:
            child.cleaned = True
            await supervisor.stop(child.handle, 0.0)

    # -- whole-table operations ------------------------------------------------------------

    async def collect_orphans(self) -> None:
        """Stop children whose objects are gone, and remove stray state files.

        A runnable: it runs once, after the caches have synced."""
        try:
            await self._collect_orphans()
        finally:
            self._orphans_collected.set()

    async def wait_orphans_collected(self) -> None:
        """Return once `collect_orphans` has run."""
        await self._orphans_collected.wait()

    async def _collect_orphans(self) -> None:
        if not self.state_dir.is_dir() or self.controller is None:
            return
        cache = self.controller.informer.cache
        for path in sorted(self.state_dir.glob("*.json")):
            name = path.stem
            namespace, _, obj_name = name.partition("_")
            if not obj_name or cache.get(obj_name, namespace) is not None:
                continue
            handle = supervisor.find_adoptable(name, self.state_dir)
            if handle is None:
                supervisor.stray(name, self.state_dir)
                continue
            gone = f"{self.kind.kind} {namespace}/{obj_name}"
            log.info("stopping pid %d: its %s is gone", handle.pid, gone)
            await supervisor.stop(handle, 0.0)

    async def release(self, keep: Callable[[Request], bool]) -> None:
        """Stop the children of the objects `keep` rejects, each with its own grace period,
        those an earlier run of this engine left included: this engine no longer runs them
        (coordinated engines: another one owns them now and starts them;
        `setpoint.runtime.coordination`)."""
        if not self._detached:
            await self._adopt_left_behind()
        lost = [(key, c) for key, c in self._table.items() if not keep(Request(key[1], key[0]))]
        for key, _ in lost:
            del self._table[key]
            log.info("%s %s/%s: owned by another engine now; stopping", self.kind.singular, *key)
        await asyncio.gather(*(self._stop(c, None, "moved") for _, c in lost))

    async def children_to_stop(self) -> list[Key]:
        """Whose children a full stop would stop now: those in the table, after adopting
        those an earlier engine left that no reconcile has looked at yet."""
        if not self._detached:
            await self._adopt_left_behind()
        return list(self._table)

    async def _stop_children(
        self, grace: float | None = None, turns: StopTurns | None = None
    ) -> list[Key]:
        """Stop every child in the table (emptying it), each with its own grace period
        unless `grace` is given, each when `turns` says (default: all at once); return
        whose they were."""
        await self.children_to_stop()
        children = list(self._table.items())
        self._table.clear()
        self._stopping = [c for _, c in children]
        kind = self.kind.kind

        async def stop(key: Key, child: Supervised) -> None:
            try:
                if turns is not None and not self._kill_now:
                    await turns.wait_turn(kind, key)
                await self._stop(child, 0.0 if self._kill_now else grace)
            finally:
                if turns is not None:
                    turns.stopped(kind, key)

        try:
            await asyncio.gather(*(stop(k, c) for k, c in children), return_exceptions=True)
        finally:
            self._stopping = []
        return [key for key, _ in children]

    def kill_stopping(self) -> None:
        """No more grace (a second Ctrl-C): SIGKILL the children being stopped by
        `_stop_children`, and stop any it stops later at once."""
        self._kill_now = True
        for child in self._stopping:
            supervisor.kill(child.handle)

    async def detach(self) -> None:
        """Stop watching every child but leave them running (as an engine that dies would);
        a later controller on the same `state_dir` adopts them."""
        self._detached = True
        children = list(self._table.values())
        self._table.clear()
        for child in children:
            child.cancel_tasks()
            await asyncio.gather(*child.tasks, return_exceptions=True)

    def pids(self) -> dict[Key, int]:
        """(namespace, name) -> pid of every running child."""
        return {k: c.handle.pid for k, c in self._table.items() if c.running}
