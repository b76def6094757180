"""Tests for setpoint.workloads.probes: schemas, the pure state machine, real probes, the loop.

Exec, HTTP and TCP probes run against real commands and servers started here;
the probe loop runs on a manual clock with a fake runner. Nothing waits on the
wall clock for something to happen: tests await the probe call itself.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.testing import ManualClock
from setpoint.workloads.probes import (
    ExecAction,
    Probe,
    Prober,
    ProbeResult,
    ProbeState,
    TCPSocketAction,
    check_probe_role,
    due,
    load_probe,
    observe,
    run_probe,
)

# --- schemas -----------------------------------------------------------------------------


def test_defaults_are_kubernetes_defaults_and_wire_form_is_camel_case() -> None:
    probe = load_probe({"httpGet": {"port": 8080}})
    assert probe.initial_delay_seconds == 0
    assert probe.period_seconds == 10
    assert probe.timeout_seconds == 1
    assert probe.success_threshold == 1
    assert probe.failure_threshold == 3
    wire = probe.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["httpGet"] == {
        "path": "/",
        "port": 8080,
        "host": "127.0.0.1",
        "scheme": "HTTP",
        "httpHeaders": [],
    }
    assert wire["periodSeconds"] == 10
    assert load_probe(wire) == probe


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"httpGet": {}}, "httpGet.port"),
        ({"httpGet": {"port": 0}}, "httpGet.port"),
        ({"httpGet": {"port": 70000}}, "httpGet.port"),
        ({"httpGet": {"port": 80, "scheme": "FTP"}}, "httpGet.scheme"),
        ({"httpGet": {"port": 80, "path": "/a b"}}, "httpGet.path"),
        (
            {"httpGet": {"port": 80, "httpHeaders": [{"name": "X\r\nY", "value": "1"}]}},
            "httpGet.httpHeaders[0].name",
        ),
        ({"exec": {"command": []}}, "exec.command"),
        ({"exec": {"command": "true"}}, "exec.command"),
        ({"tcpSocket": {}}, "tcpSocket.port"),
        ({"tcpSocket": {"port": 80}, "periodSeconds": 0}, "periodSeconds"),
        ({"tcpSocket": {"port": 80}, "successThreshold": 0}, "successThreshold"),
        ({"tcpSocket": {"port": 80}, "failureThreshold": 0}, "failureThreshold"),
        ({"tcpSocket": {"port": 80}, "timeoutSeconds": 0}, "timeoutSeconds"),
        ({"tcpSocket": {"port": 80}, "initialDelaySeconds": -1}, "initialDelaySeconds"),
        ({"tcpSocket": {"port": 80}, "periodSecs": 5}, "periodSecs"),
        ({"tcpSocket": {"port": 80, "hots": "x"}}, "tcpSocket.hots"),
    ],
)
def test_invalid_fields_are_named(value: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as caught:
        load_probe(value)
    assert caught.value.field == field


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"initialDelaySeconds": 5},
        {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}},
        {"exec": {"command": ["true"]}, "httpGet": {"port": 80}, "tcpSocket": {"port": 80}},
    ],
)
def test_exactly_one_handler(value: dict[str, Any]) -> None:
    with pytest.raises(Invalid, match="exactly one of exec, httpGet, tcpSocket") as caught:
        load_probe(value, field="spec.readinessProbe")
    assert caught.value.field == "spec.readinessProbe"
    assert "Value error" not in str(caught.value)


def test_field_prefix_names_where_the_probe_sits() -> None:
    with pytest.raises(Invalid) as caught:
        load_probe({"httpGet": {"port": "web"}}, field="spec.livenessProbe")
    assert caught.value.field == "spec.livenessProbe.httpGet.port"


def test_fractional_timeout_is_allowed_and_path_gets_its_slash() -> None:
    probe = load_probe({"httpGet": {"port": 80, "path": "healthz"}, "timeoutSeconds": 0.25})
    assert probe.timeout_seconds == 0.25
    assert probe.http_get is not None
    assert probe.http_get.path == "/healthz"


def test_liveness_and_startup_need_success_threshold_one() -> None:
    probe = load_probe({"tcpSocket": {"port": 80}, "successThreshold": 2})
    check_probe_role(probe, "readiness")
    for role in ("liveness", "startup"):
        with pytest.raises(Invalid, match=role) as caught:
            check_probe_role(probe, role, field="spec.livenessProbe")
        assert caught.value.field == "spec.livenessProbe.successThreshold"


# --- the pure state machine --------------------------------------------------------------


def tcp_probe(**fields: Any) -> Probe:
    return Probe(tcp_socket=TCPSocketAction(port=80), **fields)


def test_observe_applies_thresholds() -> None:
    probe = tcp_probe(success_threshold=2, failure_threshold=3)
    state = ProbeState(started_at=0.0)
    results = []
    for t, ok in enumerate([True, True, False, False, True, False, False, False, True, True]):
        state = observe(state, probe, ok, float(t))
        results.append(state.result)
    assert results == [
        "Unknown",
        "Success",
        "Success",
        "Success",
        "Success",
        "Success",
        "Success",
        "Failure",
        "Failure",
        "Success",
    ]
    assert state.last_run == 9.0
    assert (state.successes, state.failures) == (2, 0)


def test_due_honours_initial_delay_then_period() -> None:
    probe = tcp_probe(initial_delay_seconds=5, period_seconds=10)
    state = ProbeState(started_at=100.0)
    assert due(state, probe, 100.0) == 5.0
    assert due(state, probe, 104.0) == 1.0
    assert due(state, probe, 200.0) == 0.0
    state = observe(state, probe, True, 105.0)
    assert due(state, probe, 105.0) == 10.0
    assert due(state, probe, 112.5) == 2.5
    assert due(state, probe, 120.0) == 0.0


def trailing_run(outcomes: list[bool]) -> int:
    last = outcomes[-1]
    count = 0
    for outcome in reversed(outcomes):
        if outcome != last:
            break
        count += 1
    return count


@given(
    outcomes=st.lists(st.booleans(), min_size=1, max_size=60),
    success_threshold=st.integers(1, 5),
    failure_threshold=st.integers(1, 5),
)
def test_result_changes_only_after_threshold_consecutive_outcomes(
    outcomes: list[bool], success_threshold: int, failure_threshold: int
) -> None:
    probe = tcp_probe(success_threshold=success_threshold, failure_threshold=failure_threshold)
    state = ProbeState(started_at=0.0)
    expected: ProbeResult = "Unknown"
    for i, ok in enumerate(outcomes):
        before = state.result
        state = observe(state, probe, ok, float(i))
        run = trailing_run(outcomes[: i + 1])
        if ok and run >= success_threshold:
            expected = "Success"
        elif not ok and run >= failure_threshold:
            expected = "Failure"
        assert state.result == expected
        if state.result != before:
            # A change is always towards the latest outcome, after enough of them in a row.
            assert state.result == ("Success" if ok else "Failure")
            assert run >= (success_threshold if ok else failure_threshold)
        assert (state.successes, state.failures) == ((run, 0) if ok else (0, run))
        assert state.last_run == float(i)
        assert state.started_at == 0.0


times = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


@given(
    started_at=times,
    last_run=st.none() | times,
    now=times,
    initial_delay=st.integers(0, 10_000),
    period=st.integers(1, 10_000),
)
def test_due_is_never_negative_and_points_at_the_next_run(
    started_at: float, last_run: float | None, now: float, initial_delay: int, period: int
) -> None:
    probe = tcp_probe(initial_delay_seconds=initial_delay, period_seconds=period)
    state = ProbeState(started_at=started_at, last_run=last_run)
    wait = due(state, probe, now)
    assert wait >= 0
    at = started_at + initial_delay if last_run is None else last_run + period
    if now >= at:
        assert wait == 0
    else:
        assert now + wait == pytest.approx(at, abs=1e-6)


@given(
    outcomes=st.lists(st.booleans(), min_size=1, max_size=30),
    period=st.integers(1, 100),
)
def test_after_a_run_the_next_is_one_period_away(outcomes: list[bool], period: int) -> None:
    probe = tcp_probe(period_seconds=period)
    state = ProbeState(started_at=0.0)
    now = 0.0
    for ok in outcomes:
        now += due(state, probe, now)
        state = observe(state, probe, ok, now)
        assert due(state, probe, now) == period


# --- exec probes -------------------------------------------------------------------------


def exec_probe(*argv: str, timeout: float = 5) -> Probe:
    return Probe(exec=ExecAction(command=list(argv)), timeout_seconds=timeout)


def live_group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are neither zombies nor about to die of SIGKILL.

    A process is about to die when SIGKILL is pending for it, or when it has taken
    the signal and is exiting (PF_EXITING in its stat flags) but is not a zombie yet:
    on a loaded machine that window is long enough to be seen.
    """
    kill_bit = 1 << (signal.SIGKILL - 1)
    exiting_flag = 0x4  # PF_EXITING, include/linux/sched.h
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp, flags = fields[0], int(fields[2]), int(fields[6])
        if pgrp != pgid or state in ("Z", "X", "x") or flags & exiting_flag:
            continue
        pending = 0
        for key in ("SigPnd", "ShdPnd"):
            found = re.search(rf"^{key}:\s*([0-9a-f]+)", status, re.M)
            pending |= int(found.group(1), 16) if found else 0
        if not pending & kill_bit:
            members.append(int(entry))
    return members


async def test_exec_success() -> None:
    assert await run_probe(exec_probe(sys.executable, "-c", "print('fine')")) == (
        True,
        "exit code 0: fine",
    )


async def test_exec_failure_reports_exit_code_and_last_stderr_line() -> None:
    script = "import sys; print('out'); sys.stderr.write('first\\nno database\\n'); sys.exit(3)"
    assert await run_probe(exec_probe(sys.executable, "-c", script)) == (
        False,
        "exit code 3: no database",
    )


async def test_exec_uses_argv_without_a_shell_and_honours_env_and_cwd(tmp_path: Path) -> None:
    script = "import os, sys; sys.exit(0 if os.environ['WANT'] == os.getcwd() else 1)"
    ok, message = await run_probe(
        exec_probe(sys.executable, "-c", script),
        env={"WANT": str(tmp_path), "PATH": os.environ.get("PATH", "")},
        cwd=tmp_path,
    )
    assert (ok, message) == (True, "exit code 0")
    # "$HOME" is passed as it is: no shell expands it.
    assert await run_probe(exec_probe("test", "$HOME", "=", "$HOME")) == (True, "exit code 0")


async def test_exec_of_a_missing_command_fails_with_a_message() -> None:
    ok, message = await run_probe(exec_probe("/nonexistent/probe-command"))
    assert not ok
    assert message.startswith("cannot run '/nonexistent/probe-command'")


async def test_exec_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 10 & echo $$ $! > {pids}; sleep 10"
    ok, message = await run_probe(exec_probe("sh", "-c", script, timeout=1))
    assert (ok, message) == (False, "timed out after 1s")
    leader, background = map(int, pids.read_text().split())
    assert live_group_members(leader) == []
    with pytest.raises(ProcessLookupError):
        os.kill(leader, 0)  # reaped, not left a zombie
    assert background not in live_group_members(leader)


async def test_exec_timeout_kills_a_child_left_holding_the_output(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The shell exits at once; its background child keeps stdout open.
    script = f"sleep 10 & echo $$ $! > {pids}"
    ok, message = await run_probe(exec_probe("sh", "-c", script, timeout=1))
    assert (ok, message) == (False, "timed out after 1s")
    leader, background = map(int, pids.read_text().split())
    assert background not in live_group_members(leader)
    assert live_group_members(leader) == []


async def test_exec_sleep_killed_on_timeout() -> None:
    ok, message = await run_probe(exec_probe("sleep", "10", timeout=0.2))
    assert (ok, message) == (False, "timed out after 0.2s")


async def test_cancelling_an_exec_probe_kills_its_process_group(tmp_path: Path) -> None:
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    script = f"sleep 600 & echo $$ $! > {fifo}; sleep 600"
    task = asyncio.create_task(run_probe(exec_probe("sh", "-c", script, timeout=900)))
    loop = asyncio.get_running_loop()
    # Opening a FIFO for reading blocks until the command opens it for writing: the
    # command runs, and the probe may still be starting it (the cancel lands then).
    text = await asyncio.wait_for(loop.run_in_executor(None, fifo.read_text), 30)
    leader, _background = map(int, text.split())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        # Not the command's 600 s: the background child holds the output open.
        await asyncio.wait_for(task, 60)
    assert live_group_members(leader) == []


# --- HTTP probes -------------------------------------------------------------------------


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[int]]]:
    """Start a TCP server on a loopback port with the given handler; return its port."""
    servers: list[asyncio.Server] = []

    async def start(
        handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> int:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def http_responder(
    statuses: list[int], requests: list[str]
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        requests.append(head.decode("latin-1"))
        status = statuses.pop(0)
        response = f"HTTP/1.1 {status} Whatever\r\nContent-Length: 2\r\nConnection: close\r\n"
        writer.write(response.encode() + b"\r\nok")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    return handle


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_http_probe_200_then_503(serve: Callable[..., Awaitable[int]]) -> None:
    requests: list[str] = []
    port = await serve(http_responder([200, 503, 302, 400], requests))
    probe = load_probe(
        {
            "httpGet": {
                "port": port,
                "path": "/healthz?full=1",
                "httpHeaders": [{"name": "X-Probe", "value": "yes"}],
            }
        }
    )
    assert await run_probe(probe) == (True, "HTTP 200")
    assert await run_probe(probe) == (False, "HTTP 503")
    assert await run_probe(probe) == (True, "HTTP 302")
    assert await run_probe(probe) == (False, "HTTP 400")
    first = requests[0].split("\r\n")
    assert first[0] == "GET /healthz?full=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}" in first
    assert "X-Probe: yes" in first


async def test_http_header_given_replaces_the_default(
    serve: Callable[..., Awaitable[int]],
) -> None:
    requests: list[str] = []
    port = await serve(http_responder([204], requests))
    probe = load_probe(
        {"httpGet": {"port": port, "httpHeaders": [{"name": "host", "value": "app.local"}]}}
    )
    assert await run_probe(probe) == (True, "HTTP 204")
    lines = requests[0].split("\r\n")
    assert [line for line in lines if line.lower().startswith("host:")] == ["host: app.local"]


async def test_http_probe_times_out_on_a_silent_server(
    serve: Callable[..., Awaitable[int]],
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the probe gives up and closes
        writer.close()

    port = await serve(silent)
    probe = load_probe({"httpGet": {"port": port}, "timeoutSeconds": 0.2})
    assert await run_probe(probe) == (False, "timed out after 0.2s")


async def test_http_probe_reports_a_garbage_response(
    serve: Callable[..., Awaitable[int]],
) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH\r\n")
        await writer.drain()
        writer.close()

    port = await serve(garbage)
    ok, message = await run_probe(load_probe({"httpGet": {"port": port}}))
    assert not ok
    assert message.startswith("malformed HTTP response")


async def test_http_probe_against_a_closed_port() -> None:
    probe = load_probe({"httpGet": {"port": closed_port()}})
    assert await run_probe(probe) == (False, "connection refused")


# --- TCP probes --------------------------------------------------------------------------


async def test_tcp_probe_against_a_listening_socket(
    serve: Callable[..., Awaitable[int]],
) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    port = await serve(accept)
    assert await run_probe(load_probe({"tcpSocket": {"port": port}})) == (
        True,
        f"connected to 127.0.0.1:{port}",
    )


async def test_tcp_probe_against_a_closed_port() -> None:
    probe = load_probe({"tcpSocket": {"port": closed_port()}})
    assert await run_probe(probe) == (False, "connection refused")


# --- the probe loop ----------------------------------------------------------------------


class FakeRunner:
    """Returns scripted outcomes and records the clock time of every run."""

    def __init__(self, clock: ManualClock, outcomes: list[bool]) -> None:
        self.clock = clock
        self.outcomes = list(outcomes)
        self.ran_at: list[float] = []

    async def __call__(self, probe: Probe) -> tuple[bool, str]:
        self.ran_at.append(self.clock.monotonic())
        ok = self.outcomes.pop(0)
        return ok, f"run {len(self.ran_at)}: {'ok' if ok else 'bad'}"


async def advance(clock: ManualClock, seconds: float) -> None:
    """Move time on, then let the prober run until it is parked on the clock again."""
    clock.advance(seconds)
    await asyncio.wait_for(clock.wait_sleepers(1), 10)


@pytest.fixture
async def started() -> AsyncIterator[Callable[..., Awaitable[Prober]]]:
    tasks: list[asyncio.Task[None]] = []

    async def start(prober: Prober, clock: ManualClock) -> Prober:
        tasks.append(asyncio.create_task(prober.run()))
        await asyncio.wait_for(clock.wait_sleepers(1), 10)
        return prober

    yield start
    for task in tasks:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_prober_waits_initial_delay_then_runs_every_period(
    started: Callable[..., Awaitable[Prober]],
) -> None:
    clock = ManualClock()
    runner = FakeRunner(clock, [True] * 5)
    probe = tcp_probe(initial_delay_seconds=5, period_seconds=10)
    await started(Prober(probe, clock, lambda result, message: None, runner=runner), clock)
    await advance(clock, 4.5)
    assert runner.ran_at == []
    await advance(clock, 0.5)
    assert runner.ran_at == [5.0]
    await advance(clock, 9.0)
    assert runner.ran_at == [5.0]
    await advance(clock, 1.0)
    await advance(clock, 10.0)
    assert runner.ran_at == [5.0, 15.0, 25.0]


async def test_prober_without_initial_delay_runs_at_once(
    started: Callable[..., Awaitable[Prober]],
) -> None:
    clock = ManualClock()
    runner = FakeRunner(clock, [False, True])
    changes: list[tuple[ProbeResult, str]] = []
    probe = tcp_probe(failure_threshold=1)
    prober = Prober(probe, clock, lambda r, m: changes.append((r, m)), runner=runner)
    await started(prober, clock)
    assert runner.ran_at == [0.0]
    assert changes == [("Failure", "run 1: bad")]
    assert prober.state == ProbeState(
        started_at=0.0, successes=0, failures=1, result="Failure", last_run=0.0
    )
    assert prober.message == "run 1: bad"


async def test_prober_calls_back_only_on_transitions(
    started: Callable[..., Awaitable[Prober]],
) -> None:
    clock = ManualClock()
    outcomes = [True, True, False, False, True, False, False, False, True, True]
    runner = FakeRunner(clock, outcomes)
    changes: list[tuple[ProbeResult, str, float]] = []
    probe = tcp_probe(period_seconds=2, success_threshold=2, failure_threshold=3)

    async def on_change(result: ProbeResult, message: str) -> None:
        changes.append((result, message, clock.monotonic()))

    await started(Prober(probe, clock, on_change, runner=runner), clock)
    for _ in outcomes[1:]:
        await advance(clock, 2)
    assert runner.ran_at == [2.0 * i for i in range(10)]
    assert changes == [
        ("Success", "run 2: ok", 2.0),
        ("Failure", "run 8: bad", 14.0),
        ("Success", "run 10: ok", 18.0),
    ]


async def test_prober_initial_delay_counts_from_started_at() -> None:
    clock = ManualClock()
    clock.advance(100)
    runner = FakeRunner(clock, [True])
    probe = tcp_probe(initial_delay_seconds=30)
    prober = Prober(probe, clock, lambda r, m: None, runner=runner)
    task = asyncio.create_task(prober.run(started_at=80.0))
    await asyncio.wait_for(clock.wait_sleepers(1), 10)
    await advance(clock, 9.9)
    assert runner.ran_at == []
    await advance(clock, 0.1)
    assert runner.ran_at == [pytest.approx(110.0)]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_prober_with_real_tcp_probe_reports_the_port_opening(
    serve: Callable[..., Awaitable[int]],
) -> None:
    clock = ManualClock()
    port = closed_port()
    changes: list[tuple[ProbeResult, str]] = []
    probe = load_probe({"tcpSocket": {"port": port}, "failureThreshold": 1})
    ran = asyncio.Event()

    async def runner(p: Probe) -> tuple[bool, str]:
        try:
            return await run_probe(p)
        finally:
            ran.set()

    prober = Prober(probe, clock, lambda r, m: changes.append((r, m)), runner=runner)
    task = asyncio.create_task(prober.run())
    await asyncio.wait_for(ran.wait(), 10)
    await asyncio.wait_for(clock.wait_sleepers(1), 10)
    assert changes == [("Failure", "connection refused")]

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", port)
    try:
        ran.clear()
        clock.advance(10)
        await asyncio.wait_for(ran.wait(), 10)
        await asyncio.wait_for(clock.wait_sleepers(1), 10)
        assert changes[-1] == ("Success", f"connected to 127.0.0.1:{port}")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        server.close()
        await server.wait_closed()
