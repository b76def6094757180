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

Pure: reads the object; stopping the engine and exiting are `setpoint.cli.up`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from setpoint.model import Kind, Object
from setpoint.model.wellknown import EXIT_ON_END, EXIT_ON_FAILURE, SUCCESS_EXIT_CODES
from setpoint.workloads.children import parse_time

__all__ = ["RunEnd", "run_end"]

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
