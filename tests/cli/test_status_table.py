"""The live view's text, decided purely (`setpoint.cli.status_table`) and drawn by rich at a
fixed width (`setpoint.cli.live.LiveView` into a string): names are never cut, the reason
gives way first, a detail line names the root blocker with a command, and health tells
progressing from failed."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from setpoint.cli.live import (
    LOG_LINES,
    LOG_LINES_MIN,
    LiveView,
    LogTail,
    StatusBoard,
    log_colour,
    log_source,
)
from setpoint.cli.logstream import colour_of
from setpoint.cli.status_table import (
    HEADER,
    Health,
    Key,
    health,
    key_of,
    line_text,
    view_lines,
)
from setpoint.clock import parse_rfc3339
from setpoint.model import Object
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS

CREATED = "2027-01-15T08:00:00Z"
NOW = parse_rfc3339(CREATED) + 300


def obj(
    kind: str,
    name: str,
    *,
    ready: tuple[str, str, str] | None = ("False", "Pending", ""),
    depends_on: list[dict[str, str]] | None = None,
    namespace: str = "default",
    **status: Any,
) -> Object:
    fields = ("type", "status", "reason", "message")
    extra = status.pop("conditions", [])
    ready_condition = [("Ready", *ready)] if ready is not None else []
    conditions = [dict(zip(fields, c, strict=True)) for c in [*extra, *ready_condition]]
    spec: dict[str, Any] = {"dependsOn": depends_on} if depends_on else {}
    meta = {"name": name, "namespace": namespace, "creationTimestamp": CREATED}
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
        "status": {"conditions": conditions, **status},
    }


def board(*objects: Object) -> dict[Key, Object]:
    return {key_of(o): o for o in objects}


INIT_FAILED = (
    "the job failed: failed 3 times, more than backoffLimit (2); last: pg.py: the postgres "
    "user cannot reach /root/setpoint/.setpoint/webapp-pg: /root is not searchable by it; "
    "change its spec to run it again"
)


def webapp(prefix: str = "") -> dict[Key, Object]:
    """The webapp chain with db-init failed: db, migrate and web wait behind it."""
    init, db, migrate, web = (prefix + n for n in ("db-init", "db", "migrate", "web"))
    failed = ("BackoffLimitExceeded", INIT_FAILED)
    waiting_for_init = f"Job/{init} is not Complete: BackoffLimitExceeded: {INIT_FAILED}"
    waiting_for_db = f"Process/{db} is not Ready: ..."
    return board(
        obj(
            "Job",
            init,
            ready=("False", *failed),
            phase="Failed",
            conditions=[("Failed", "True", *failed), ("Complete", "False", *failed)],
        ),
        obj(
            "Process",
            db,
            ready=("False", "WaitingForDependency", waiting_for_init),
            depends_on=[{"kind": "Job", "name": init, "condition": "Complete"}],
            phase="Waiting",
        ),
        obj(
            "Job",
            migrate,
            ready=("False", "WaitingForDependency", waiting_for_db),
            conditions=[("Complete", "False", "WaitingForDependency", waiting_for_db)],
            depends_on=[{"kind": "Process", "name": db}],
            phase="Waiting",
        ),
        obj(
            "Deployment",
            web,
            ready=("False", "WaitingForDependency", f"Job/{migrate} ..."),
            depends_on=[
                {"kind": "job", "name": migrate, "condition": "Complete"},
                {"kind": "Process", "name": db},
            ],
            availableReplicas=0,
        ),
    )


ALIASES = StatusBoard([DEPLOYMENT, PROCESS, JOB]).aliases


def texts(objects: dict[Key, Object], width: int) -> list[str]:
    return [line_text(line) for line in view_lines(objects, width, NOW, aliases=ALIASES)]


def drawn(objects: dict[Key, Object], width: int) -> list[str]:
    """What rich writes for the live view in a terminal `width` columns wide."""
    out = io.StringIO()
    console = Console(file=out, width=width, height=50, color_system=None, force_terminal=False)
    view = LiveView(StatusBoard([DEPLOYMENT, PROCESS, JOB]), console)
    view.board.objects.update(objects)
    console.print(view.render(NOW))
    return out.getvalue().splitlines()


LONG = "payments-reconciliation-"


def test_at_80_columns_names_are_whole_and_the_reason_is_cut_first() -> None:
    lines = drawn(webapp(LONG), 80)
    assert all(len(line) <= 80 for line in lines), lines
    for name in ("Job/db-init", "Process/db", "Job/migrate", "Deployment/web"):
        kind, _, short = name.partition("/")
        ref = f"{kind}/{LONG}{short}"
        assert any(line.startswith(ref + " ") for line in lines), (ref, lines)
    header = lines[0].split()
    assert header[0] == "KIND/NAME"
    assert "REASON/MESSAGE" in header
    assert "PID" not in header
    row = next(line for line in lines if line.startswith("Job/payments-reconciliation-db-init"))
    assert "BackoffLimitExceeded: the job" in row
    assert row.endswith("…")


def test_at_60_columns_less_important_columns_go_and_names_stay() -> None:
    lines = drawn(webapp(LONG), 60)
    assert all(len(line) <= 60 for line in lines), lines
    assert lines[0].split()[:2] == ["KIND/NAME", "READY"]
    assert not {"PID", "AGE", "RESTARTS"} & set(lines[0].split())
    assert any(line.startswith("Deployment/payments-reconciliation-web ") for line in lines)


def test_at_200_columns_everything_shows() -> None:
    lines = drawn(webapp(LONG), 200)
    assert lines[0].split() == list(HEADER)
    assert all(len(line) <= 200 for line in lines), lines
    row = next(line for line in lines if line.startswith("Job/payments-reconciliation-db-init"))
    assert row.split()[-3:] == ["0", "-", "5m"]
    assert "; last: pg.py: the postgres user cann…" in row  # all 200 columns used
    waiting = next(line for line in lines if line.startswith("Job/payments-reconciliation-migrate"))
    assert "WaitingForDependency: Process/payments-reconciliation-db is not Ready: ..." in waiting


def test_a_waiting_object_names_its_root_blocker_and_how_to_look_at_it() -> None:
    lines = texts(webapp(), 80)
    text = "\n".join(lines)
    for ref in ("Process/db", "Job/migrate", "Deployment/web"):
        at = next(i for i, line in enumerate(lines) if line.startswith(ref + " "))
        detail = lines[at + 1]
        assert detail.startswith("  ↳ Job/db-init: BackoffLimitExceeded: the job failed"), detail
        assert len(detail) == 80  # cut at the width's end, not at a word
        assert "setpoint describe job/db-init" in "\n".join(lines[at + 1 : at + 4])
    assert "waiting for" not in text
    # the failed one itself: its own reason, in full over several lines, and `explain`
    at = next(i for i, line in enumerate(lines) if line.startswith("Job/db-init "))
    end = next(i for i, line in enumerate(lines) if line.startswith("Job/migrate "))
    own = " ".join(line.strip() for line in lines[at + 1 : end])
    assert own == f"↳ BackoffLimitExceeded: {INIT_FAILED}  → setpoint explain job/db-init"


def test_the_chain_ends_at_a_missing_object_a_kind_not_shown_or_a_cycle() -> None:
    ghost = [{"kind": "Process", "name": "ghost"}]
    missing = board(obj("Process", "a", depends_on=ghost, ready=("False", "Pending", "...")))
    lines = texts(missing, 100)
    assert "waiting for Process/ghost to be Ready: it does not exist" in lines[2]
    assert "setpoint describe process/ghost" in "\n".join(lines)
    other = [{"kind": "Greeting", "name": "hello"}]
    waiting = ("False", "WaitingForDependency", "Greeting/hello is not Ready: Pending")
    unshown = texts(board(obj("Process", "a", depends_on=other, ready=waiting)), 100)
    assert unshown[2] == (
        "  ↳ WaitingForDependency: Greeting/hello is not Ready: Pending"
        "  → setpoint describe process/a"
    )
    loop = board(
        obj("Process", "a", depends_on=[{"kind": "Process", "name": "b"}]),
        obj("Process", "b", depends_on=[{"kind": "Process", "name": "a"}]),
    )
    assert "setpoint describe" in "\n".join(texts(loop, 100))


def test_ready_objects_get_no_detail_and_other_namespaces_say_so() -> None:
    objects = board(
        obj("Process", "up", ready=("True", "ReadinessProbeSucceeded", "ok")),
        obj("Process", "x", namespace="team", ready=("False", "CrashLoopBackOff", "back-off 10s")),
    )
    lines = texts(objects, 120)
    assert lines[1].startswith("Process/up ")  # Ready: no detail
    assert lines[2].startswith("Process/team/x ")
    assert lines[3] == "  ↳ CrashLoopBackOff: back-off 10s  → setpoint explain -n team process/x"
    assert len(lines) == 4


def test_health_tells_progressing_from_failed() -> None:
    cases = {
        ("True", "Running"): Health.READY,
        ("False", "Completed"): Health.READY,
        ("False", "WaitingForDependency"): Health.PROGRESSING,
        ("False", "DependencyNotReady"): Health.PROGRESSING,
        ("False", "ReadinessProbePending"): Health.PROGRESSING,
        ("False", "Terminating"): Health.PROGRESSING,
        ("Unknown", "SomethingNew"): Health.PROGRESSING,
        ("False", "CrashLoopBackOff"): Health.FAILED,
        ("False", "BackoffLimitExceeded"): Health.FAILED,
        ("False", "StartFailed"): Health.FAILED,
        ("False", "ProgressDeadlineExceeded"): Health.FAILED,
    }
    for (status, reason), expected in cases.items():
        assert health(obj("Process", "p", ready=(status, reason, ""))) is expected, reason
    stall = [("Stalled", "True", "StartFailed", "no such file")]
    stalled = obj("Process", "p", ready=("False", "Running", ""), conditions=stall)
    assert health(stalled) is Health.FAILED
    assert health(obj("Thermostat", "t", ready=None)) is Health.UNKNOWN


def test_colours_follow_health() -> None:
    objects = board(
        obj("Process", "ok", ready=("True", "Running", "")),
        obj("Process", "wait", ready=("False", "ReadinessProbePending", "")),
        obj("Process", "crash", ready=("False", "CrashLoopBackOff", "back-off")),
    )
    out = io.StringIO()
    console = Console(file=out, width=100, color_system="standard", force_terminal=True)
    view = LiveView(StatusBoard(), console)
    view.board.objects.update(objects)
    console.print(view.render(NOW))
    colour = {"crash": "\x1b[31m", "ok": "\x1b[32m", "wait": "\x1b[33m"}  # red, green, yellow
    for name, code in colour.items():
        line = next(line for line in out.getvalue().splitlines() if f"Process/{name} " in line)
        assert line.startswith(code), (name, line)


names = st.from_regex(r"[a-z][a-z0-9-]{0,50}[a-z0-9]", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["Process", "Job", "Deployment"]), names),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    st.integers(min_value=40, max_value=220),
    st.text(st.characters(max_codepoint=0x24F), max_size=300),  # one column each
)
def test_names_are_never_cut(refs: list[tuple[str, str]], width: int, message: str) -> None:
    objects = board(*(obj(k, n, ready=("False", "CrashLoopBackOff", message)) for k, n in refs))
    lines = texts(objects, width)
    rows = [line for line in lines if not line.startswith(" ")][1:]
    assert sorted(row.split("  ")[0] for row in rows) == sorted(f"{k}/{n}" for k, n in refs)
    longest = max(len(f"{k}/{n}") for k, n in refs)
    for line in lines:
        hint = "setpoint explain" in line and line.lstrip().startswith("→")
        if longest <= width and not hint:
            assert len(line) <= width, (width, line)


def test_log_lines_carry_their_object_and_a_stable_colour() -> None:
    assert log_source("default_web-1") == "web-1"
    assert log_source("team_web") == "team/web"
    for name in ("web-1", "db", "payments-reconciliation-database-init"):
        out = io.StringIO()
        Console(file=out, color_system="standard", force_terminal=True).print(
            Text(name, style=log_colour(name)), end=""
        )
        assert out.getvalue().startswith(f"\x1b[{colour_of(name)}m")  # as `logs` colours it


def test_the_log_area_shows_the_newest_lines_each_after_its_name(tmp_path: Path) -> None:
    logs = LogTail(tmp_path)
    logs.lines.extend((f"web-{i % 2}", f"line {i} " + "x" * 100) for i in range(40))

    def log_area(height: int) -> list[str]:
        out = io.StringIO()
        console = Console(file=out, width=60, height=height, color_system=None)
        view = LiveView(StatusBoard(), console, logs=logs)
        view.board.objects.update(webapp())
        console.print(view.render(NOW))
        lines = out.getvalue().splitlines()
        assert all(len(line) <= 60 for line in lines)
        return lines[lines.index("── logs " + "─" * 52) + 1 :]

    tall = log_area(60)
    assert len(tall) == LOG_LINES  # bounded: the newest LOG_LINES
    assert [line.split()[3] for line in tall] == [str(i) for i in range(28, 40)]
    assert tall[-1].startswith("web-1 | line 39 xxx")
    assert tall[-1].endswith("x…")
    short = log_area(20)  # the table takes most of it: the newest few
    assert short == tall[-LOG_LINES_MIN:]
