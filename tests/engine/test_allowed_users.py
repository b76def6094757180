"""`EngineSettings.allowed_users` and `setpoint up --allow-user`: the users an engine's
commands may run as. A list the machine or the engine cannot honour is refused when the
engine is made (and by `up` before it opens the store), in one line naming the option; an
engine given a list runs only those users, root included only if listed.

An engine that is not root is played by patching `os.geteuid`; the engine that runs
children as another user needs root (skipped otherwise)."""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from setpoint.engine import Engine, EngineSettings, builtin_kinds
from setpoint.errors import Invalid
from setpoint.model import READY, STALLED, Object, get_condition
from setpoint.runtime.run_as import UserPolicy, UserRefused
from setpoint.store import open_store
from setpoint.testing import wait_for
from setpoint.workloads.process import PROCESS

NOBODY = pwd.getpwnam("nobody")
TIMEOUT = 10.0


def settings(url: str, *allowed: str) -> EngineSettings:
    return EngineSettings(store_url=url, allowed_users=frozenset(allowed), record_timeline=False)


async def test_a_user_the_machine_lacks_is_refused_when_the_engine_is_made() -> None:
    store = await open_store("memory://", builtin_kinds())
    try:
        with pytest.raises(Invalid) as refused:
            Engine(store, settings("memory://", "no-such-user-here"))
    finally:
        await store.close()
    assert str(refused.value) == "--allow-user: no user 'no-such-user-here' on this machine"


async def test_an_engine_that_is_not_root_may_list_only_its_own_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: NOBODY.pw_uid)  # as if the engine were nobody
    store = await open_store("memory://", builtin_kinds())
    try:
        with pytest.raises(Invalid) as refused:
            Engine(store, settings("memory://", "root"))
        Engine(store, settings("memory://", "nobody"))  # its own: nothing to switch
    finally:
        await store.close()
    assert str(refused.value) == (
        "--allow-user: 'root': the engine runs as 'nobody', not root, and cannot switch"
        " users; list no other user, or run the engine as root"
    )


def test_up_refuses_an_unknown_user_in_one_line_before_it_starts(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/state.db"
    argv = [sys.executable, "-m", "setpoint", "--store", store, "up", "--allow-user", "nosuch"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "error: --allow-user: no user 'nosuch' on this machine"
    ]
    assert not (tmp_path / "state.db").exists()


def process(name: str, **spec: object) -> Object:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": ["sleep", "infinity"], **spec},
    }


def condition(obj: Object | None, type_: str) -> dict[str, object]:
    return get_condition((obj or {}).get("status"), type_) or {}


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
async def test_an_engine_given_a_list_runs_only_the_users_on_it(tmp_path: Path) -> None:
    """Root, allowed only nobody: a Process without `user:` (root) is Stalled, reason
    UserNotAllowed; one with `user: nobody` runs as nobody."""
    url = f"sqlite:///{tmp_path}/state.db"
    store = await open_store(url, builtin_kinds())
    try:
        async with Engine(store, settings(url, "nobody")) as engine:
            running = asyncio.create_task(engine.run())
            await store.create(process("as-root"))
            await store.create(process("as-nobody", user="nobody"))
            refused = await wait_for(
                store,
                PROCESS,
                "as-root",
                lambda o: condition(o, STALLED).get("reason") == "UserNotAllowed",
                within=TIMEOUT,
            )
            ran = await wait_for(
                store,
                PROCESS,
                "as-nobody",
                lambda o: condition(o, READY).get("status") == "True",
                within=TIMEOUT,
            )
            assert ran is not None
            assert os.stat(f"/proc/{ran['status']['pid']}").st_uid == NOBODY.pw_uid
            engine.stop()
            await asyncio.wait_for(running, TIMEOUT)
    finally:
        await store.close()
    assert "--allow-user root" in str(condition(refused, STALLED)["message"])


@pytest.mark.parametrize(
    ("engine_uid", "allowed", "user", "switches_to"),
    [
        (0, None, None, None),  # no user: the engine's own, no switch
        (0, None, "root", None),  # naming the engine's own user is the same
        (0, None, "nobody", "nobody"),  # a root engine may switch to anyone by default
        (0, {"nobody"}, "nobody", "nobody"),
        (0, {"root", "nobody"}, None, None),
        (NOBODY.pw_uid, None, "nobody", None),  # an engine run by nobody, as nobody
        (NOBODY.pw_uid, None, None, None),
    ],
)
def test_the_policy_allows(
    engine_uid: int, allowed: set[str] | None, user: str | None, switches_to: str | None
) -> None:
    policy = UserPolicy(None if allowed is None else frozenset(allowed), engine_uid)
    account = policy.account(user)
    assert (None if account is None else account.pw_name) == switches_to


@pytest.mark.parametrize(
    ("engine_uid", "allowed", "user", "reason"),
    [
        (0, {"nobody"}, None, "UserNotAllowed"),  # a list without root: no root children
        (0, {"nobody"}, "root", "UserNotAllowed"),
        (0, None, "no-such-user-here", "UserUnknown"),
        (NOBODY.pw_uid, None, "root", "UserNotAllowed"),  # not root: cannot switch
    ],
)
def test_the_policy_refuses(
    engine_uid: int, allowed: set[str] | None, user: str | None, reason: str
) -> None:
    policy = UserPolicy(None if allowed is None else frozenset(allowed), engine_uid)
    with pytest.raises(UserRefused) as refused:
        policy.account(user)
    assert refused.value.condition_reason == reason
    assert str(refused.value).startswith("spec.user: ")
    assert "\n" not in str(refused.value)
