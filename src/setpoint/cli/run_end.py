"""When a foreground `setpoint up` ends by itself, as process-compose ends its run: a
Process or Job annotated `setpoint.dev/exit-on-end: "true"` whose child ended by itself, or
`setpoint.dev/exit-on-failure: "true"` whose child failed (`setpoint.model.wellknown`;
the process-compose translator writes them for `availability.exit_on_end` and
`restart: exit_on_failure`).

`run_end(kind, obj, since)` reads one object as an informer delivers it and says whether its
last exit ends the run, and with what exit code. It does once the object has finished
(phase `Succeeded` or `Failed`: its restart policy, or a Job's retries, start it no more,
as process-compose acts only once a process stops restarting), with an exit recorded at or
after `since` (when this `up` began: an exit a previous run recorded does not count). The
exit code is the child's, 0 when it is a success (0 or one of
`setpoint.dev/success-exit-codes`), 255 when a signal killed it or its code is unknown (as
process-compose, whose Go runtime reports -1 there, which `exit` makes 255). An exit the
controller asked for (a stop, a restart, a liveness kill) never ends the run.

`project_end(members)` reads the objects of a process-compose project (those annotated
`setpoint.dev/compose-project`) and says whether the run ends as process-compose ends it:
once every one of them has ended (phase `Succeeded` or `Failed`: nothing starts it again; a
suspended one, `setpoint stop`, waits for `setpoint start`) or is *skipped*, with exit code
0; at once, with exit code 1, when a skipped one is annotated
`setpoint.dev/exit-on-skipped`. Skipped: it has started no child of its current spec and one
of its `dependsOn` names a member that has ended, or is skipped, without meeting the
condition, which then nothing will meet (a dependency on a process that failed,
`process_completed_successfully`; on one that exited without becoming Ready). setpoint keeps
such an object waiting (`WaitingForDependency`: running the dependency again lets it start);
process-compose marks it Skipped and counts it as done. A member not yet observed under its
current spec or restart request (`status.observedGeneration`, `status.restartedAt`) has not
ended.

Pure: reads the objects; stopping the engine and exiting are `setpoint.cli.up`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from setpoint.model import Kind, Object
from setpoint.model.wellknown import (
    EXIT_ON_END,
    EXIT_ON_FAILURE,
    EXIT_ON_SKIPPED,
    RESTARTED_AT,
    SUCCESS_EXIT_CODES,
)
from setpoint.runtime.plan import parse_time
from setpoint.workloads.dependencies import Dependency, holds

__all__ = ["RunEnd", "project_end", "run_end"]

FINISHED = ("Succeeded", "Failed")
"""The phases of a Process or Job that is not started again."""
UNKNOWN_EXIT = 255
"""The exit code when a signal ended the child or its code is unknown (process-compose's)."""


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The run ends because of `ref` (`Process/web`), with exit code `code`; `why` is the
    line `up` prints."""

    ref: str
    code: int
    why: str


def run_end(kind: Kind, obj: Object, since: float) -> RunEnd | None:
    """Whether `obj`'s last exit ends the run (see the module docstring)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    on_end = annotations.get(EXIT_ON_END) == "true"
    on_failure = annotations.get(EXIT_ON_FAILURE) == "true"
    if not (on_end or on_failure):
        return None
    status = obj.get("status") or {}
    if status.get("phase") not in FINISHED:
        return None  # running, or restarting: not the end yet
    last: Any = status.get("lastExit")
    if not isinstance(last, dict) or last.get("stoppedOnRequest"):
        return None
    finished = parse_time(last.get("finishedAt"))
    if finished is None or finished < since:
        return None
    code = last.get("code")
    success = code == 0 or (
        isinstance(code, int) and code in _codes(annotations.get(SUCCESS_EXIT_CODES))
    )
    if not on_end and success:
        return None
    ref = f"{kind.kind}/{obj['metadata']['name']}"
    if isinstance(code, int):
        ended = f"exited with code {code}"
    elif isinstance(last.get("signal"), int):
        ended = f"was killed by signal {last['signal']}"
    else:
        ended = "ended (exit code unknown)"
    rule = EXIT_ON_END if on_end else EXIT_ON_FAILURE
    exit_code = 0 if success else code if isinstance(code, int) else UNKNOWN_EXIT
    return RunEnd(ref, exit_code, f"{ref} {ended} ({rule}): stopping everything")


def _codes(text: Any) -> set[int]:
    """The exit codes `setpoint.dev/success-exit-codes` lists (what is not a number: none)."""
    if not isinstance(text, str):
        return set()
    return {int(part) for part in text.split(",") if part.strip().lstrip("-").isdigit()}


def project_end(members: Mapping[str, Object]) -> RunEnd | None:
    """Whether a process-compose project's run ends (see the module docstring). `members`:
    each object of the project by `Kind/name` (`Process/web`, `Job/seed`), as last read."""
    if not members:
        return None
    ended = {ref for ref, obj in members.items() if _observed(obj) and _phase(obj) in FINISHED}
    skipped: dict[str, str] = {}
    changed = True
    while changed:  # a member skipped may make its dependents skipped: to a fixed point
        changed = False
        for ref, obj in members.items():
            if ref in ended or ref in skipped or not _observed(obj) or _started(obj):
                continue
            why = _never_met(obj, members, ended, skipped.keys())
            if why is not None:
                skipped[ref] = why
                changed = True
    for ref in sorted(skipped):
        annotations = members[ref]["metadata"].get("annotations") or {}
        if annotations.get(EXIT_ON_SKIPPED) == "true":
            why = f"{ref} was skipped: {skipped[ref]} ({EXIT_ON_SKIPPED}): stopping everything"
            return RunEnd(ref, 1, why)
    if len(ended) + len(skipped) < len(members):
        return None
    done = f"every process has ended ({len(ended)} ended"
    if skipped:
        done += f", {len(skipped)} skipped: " + "; ".join(
            f"{ref}: {why}" for ref, why in sorted(skipped.items())
        )
    return RunEnd("", 0, done + "): stopping")


def _phase(obj: Object) -> Any:
    return (obj.get("status") or {}).get("phase")


def _observed(obj: Object) -> bool:
    """Whether `obj`'s status is of its current spec and restart request."""
    status = obj.get("status") or {}
    metadata = obj["metadata"]
    if status.get("observedGeneration", metadata.get("generation")) != metadata.get("generation"):
        return False
    requested = (metadata.get("annotations") or {}).get(RESTARTED_AT)
    return bool(status.get("phase")) and status.get("restartedAt") == requested


def _started(obj: Object) -> bool:
    """Whether a child of `obj`'s current spec has started."""
    status = obj.get("status") or {}
    return bool(status.get("startedGeneration") == obj["metadata"].get("generation"))


def _never_met(
    obj: Object, members: Mapping[str, Object], ended: Set[str], skipped: Set[str]
) -> str | None:
    """Why a dependency of `obj` will never be met (its object, a member, has ended or is
    skipped, and does not meet it), or None."""
    namespace = obj["metadata"].get("namespace")
    for entry in (obj.get("spec") or {}).get("dependsOn") or ():
        dep = Dependency.model_validate(entry)
        ref = f"{dep.kind}/{dep.name}"
        if (dep.namespace or namespace) != namespace or holds(dep, members.get(ref)) is None:
            continue
        if ref in skipped:
            return f"{ref} was skipped"
        if ref in ended:
            return f"{ref} ended without being {dep.condition}"
    return None
