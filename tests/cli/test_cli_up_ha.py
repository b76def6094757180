"""`setpoint up --ha shard --identity NAME`: several engines share one store, each Process
runs on exactly one of them (the one that owns it); when one joins, the Processes it now
owns move to it; a plain `up` is refused beside them; when one stops its Processes move to
the others.

Real `setpoint up` processes, real children; waits are conditions with a timeout.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import yaml
from cli_kit import CLI, TIMEOUT, Running
from test_cli_up import children, free_port, process

from setpoint.engine.engine import member_workspace, workspace_of
from setpoint.runtime.sharding import HashRing

NAMES = [f"p{i}" for i in range(6)]


def up_ha(cli: CLI, identity: str) -> Running:
    return cli.start("up", "--ha", "shard", "--identity", identity)


def state_files(cli: CLI, identity: str) -> set[str]:
    directory = cli.directory / "run" / "members" / identity  # beside the store
    return {p.stem for p in directory.glob("*.json")} if directory.exists() else set()


def wait_children(token: str, names: list[str], engines: list[Running]) -> dict[str, int]:
    """Every one of `names` runs as exactly one child (`children` fails on two)."""
    deadline = time.monotonic() + 2 * TIMEOUT
    while True:
        running = children(token)
        if set(running) == set(names):
            return running
        for engine in engines:
            assert engine.proc.poll() is None, f"an engine exited: {engine.seen}"
        if time.monotonic() > deadline:
            pytest.fail(f"children {sorted(running)}, want {names}")
        time.sleep(0.1)  # /proc has no change notification: poll the condition


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_shard_engines_split_the_processes_and_take_over_when_one_stops(
    cli: CLI, token: str
) -> None:
    app = cli.directory / "app"
    app.mkdir()
    for name in NAMES:
        (app / f"{name}.yaml").write_text(yaml.safe_dump(process(name, free_port(), token)))
    cli.ok("apply", "-f", str(app))
    everything = {f"default_{n}" for n in NAMES}
    one = up_ha(cli, "one")
    wait_children(token, NAMES, [one])
    wait_state(cli, "one", everything, [one])

    # A second engine joins: the Processes it now owns move (stopped by one, started by two;
    # `children` fails if it ever finds two children of one Process).
    two = up_ha(cli, "two")
    ring = HashRing({"one", "two"})
    of_two = {f"default_{n}" for n in NAMES if ring.owner(f"default/{n}") == "two"}
    assert of_two, "the ring gives two none of the Processes: pick other names"
    wait_state(cli, "two", of_two, [one, two], token=token)
    wait_state(cli, "one", everything - of_two, [one, two], token=token)
    wait_children(token, NAMES, [one, two])

    plain = cli("up")
    assert plain.code == 1
    assert "engines coordinated by leases" in plain.err
    assert "one, two" in plain.err

    code, _ = one.stop(signal.SIGTERM)  # graceful: stops its children, leaves the group
    assert code == 0
    wait_children(token, NAMES, [two])
    wait_state(cli, "two", everything, [two])
    code, _ = two.stop(signal.SIGTERM)
    assert code == 0
    assert children(token) == {}


def wait_state(
    cli: CLI, identity: str, want: set[str], engines: list[Running], *, token: str = ""
) -> None:
    """Until `identity`'s state files are those of `want` (checking meanwhile, with
    `token`, that no Process ever has two children)."""
    deadline = time.monotonic() + 2 * TIMEOUT
    while state_files(cli, identity) != want:
        if token:
            children(token)  # fails on two children of one Process
        for engine in engines:
            assert engine.proc.poll() is None, f"an engine exited: {engine.seen}"
        assert time.monotonic() < deadline, f"{identity} runs {state_files(cli, identity)}"
        time.sleep(0.05)  # state files have no change notification: poll the condition


def test_ha_needs_an_identity_and_the_foreground(cli: CLI) -> None:
    for args, complaint in [
        (("up", "--ha", "shard"), "--identity"),
        (("up", "--ha", "leader", "--identity", "a/b"), "--identity"),
        (("up", "--identity", "a"), "--ha"),
        (("up", "-d", "--ha", "shard", "--identity", "a"), "foreground"),
    ]:
        result = cli(*args)
        assert result.code != 0, args
        assert complaint in result.err, (args, result.err)


def test_members_dir_is_beside_the_store(tmp_path: Path) -> None:
    ws = member_workspace(workspace_of(f"sqlite:///{tmp_path}/state.db"), "one")
    assert ws.state_dir == tmp_path / "run" / "members" / "one"
    assert ws.job_state_dir == tmp_path / "run" / "members" / "one" / "jobs"
    assert ws.log_dir == tmp_path / "logs"
