"""The main job works for everyone: the REAL `setpoint up examples/webapp`, on a clone-like
copy whose manifest still says `python3`, runs to Ready, with nothing to chmod,

* as root from a directory the `postgres` OS user cannot reach (a `mktemp -d` one, 0700):
  pg.py keeps the cluster under that user's home and links it;
* as an ordinary user (as root, the test runs the engine as `nobody`, from a virtual
  environment of its own, in a directory it owns): PostgreSQL runs as that user;
* started as `<venv>/bin/setpoint` with a PATH that does not name the virtual environment:
  the example's `python3` is the environment's, which has psycopg.

Each ends with SIGTERM and checks that no process is left behind.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from webapp_engine import Engine, Staged, ready_line, stage_webapp
from webapp_support import (
    postgres_scratch_dir,
    private_scratch_dir,
    processes_under,
    require_postgresql,
)

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A PATH without this test's virtual environment (nor root's own tools)."""
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def runs_to_ready(staged: Staged, engine: Engine) -> None:
    """The whole chain turns Ready, the Service answers, and SIGTERM leaves nothing behind."""
    try:
        engine.expect(ready_line("Deployment/web"), "web Ready", within=240)
        url = f"http://127.0.0.1:{staged.service_port}/"
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            assert response.read().decode().startswith("hello from web-")
        code, err = engine.stop()
        assert code == 0, err
        assert processes_under(staged.base) == []
    finally:
        engine.kill()
        for pid in processes_under(staged.base):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="the postgres user is switched to only by root")
def test_root_in_a_private_directory_runs_the_webapp_to_ready() -> None:
    require_postgresql()
    with private_scratch_dir() as base:
        assert stat.S_IMODE(base.stat().st_mode) == 0o700  # as `mktemp -d` makes it
        staged = stage_webapp(base, python=None)
        runs_to_ready(staged, Engine(base, staged.manifest))
        datadir = base / ".setpoint" / "webapp-pg"
        assert datadir.is_symlink()  # the cluster lives where postgres reaches it
        assert datadir.resolve().parent == Path(pwd.getpwnam("postgres").pw_dir) / "setpoint"


# -- an ordinary user ----------------------------------------------------------------------


def as_user(
    user: pwd.struct_passwd, argv: list[str | Path], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=user_environment(user, cwd),
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def user_environment(user: pwd.struct_passwd, home: Path) -> dict[str, str]:
    """A login-like environment for `user`, whose home is `home` (nobody's does not exist)."""
    name = user.pw_name
    return {"PATH": SYSTEM_PATH, "HOME": str(home), "USER": name, "LOGNAME": name, "LANG": "C"}


def chown_tree(top: Path, user: pwd.struct_passwd) -> None:
    for directory, _, files in os.walk(top):
        for path in [directory, *(os.path.join(directory, f) for f in files)]:
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def user_venv(user: pwd.struct_passwd, base: Path) -> Path:
    """The python of a virtual environment `user` made in `base`, from an interpreter of this
    one's version that it can run, with this environment's packages (setpoint, psycopg) on
    its path: `user` may not reach the interpreter this one was made from (a pyenv under
    /root). Skips the test when there is none such."""
    candidates = [
        os.path.realpath(sys.executable),
        getattr(sys, "_base_executable", ""),
        shutil.which(f"python{VERSION}", path=SYSTEM_PATH) or "",
    ]
    version_of = "import sys; print('%d.%d' % sys.version_info[:2])"
    for candidate in dict.fromkeys(c for c in candidates if c):
        with contextlib.suppress(PermissionError):  # one under a directory closed to it
            if as_user(user, [candidate, "-c", version_of], base).stdout.strip() == VERSION:
                break
    else:
        pytest.skip(f"no python{VERSION} that {user.pw_name} can run: {candidates}")
    venv = base / "venv"
    made = as_user(user, [candidate, "-m", "venv", "--without-pip", venv], base)
    if made.returncode != 0:
        pytest.skip(f"{candidate} -m venv failed: {made.stderr.strip()}")
    ours = sysconfig.get_path("purelib")
    theirs = venv / "lib" / f"python{VERSION}" / "site-packages"
    (theirs / "setpoint-tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    python = venv / "bin" / "python"
    check = as_user(user, [python, "-c", "import setpoint, psycopg, yaml"], base)
    if check.returncode != 0:
        pytest.skip(f"{user.pw_name} cannot import this environment's packages: {check.stderr}")
    return python


@contextlib.contextmanager
def ordinary_user_dir() -> Iterator[tuple[Path, pwd.struct_passwd | None]]:
    """A fresh directory and the ordinary user who owns it: `nobody` when root (None: this
    process's own user otherwise)."""
    with private_scratch_dir() as base:
        if os.geteuid() != 0:
            yield base, None
            return
        user = pwd.getpwnam("nobody")
        os.chown(base, user.pw_uid, user.pw_gid)
        yield base, user


def test_an_ordinary_user_runs_the_webapp_to_ready() -> None:
    require_postgresql()
    with ordinary_user_dir() as (base, user):
        staged = stage_webapp(base, python=None)
        if user is None:
            engine = Engine(base, staged.manifest)
        else:
            chown_tree(base / "examples", user)
            python = user_venv(user, base)  # not activated: PATH does not name it
            env = user_environment(user, base)
            command = [python, "-m", "setpoint"]
            engine = Engine(base, staged.manifest, command=command, env=env, user=user)
        runs_to_ready(staged, engine)
        cluster = base / ".setpoint" / "webapp-pg"
        assert not cluster.is_symlink()
        owner = os.geteuid() if user is None else user.pw_uid
        assert (cluster / "PG_VERSION").stat().st_uid == owner  # PostgreSQL ran as the user


# -- <venv>/bin/setpoint -------------------------------------------------------------------


def without_venv(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` as a shell where the virtual environment is not activated has it."""
    bin_dir = os.path.normpath(Path(sys.prefix) / "bin")
    path = environ.get("PATH", "").split(os.pathsep)
    env = {k: v for k, v in environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in path if os.path.normpath(p) != bin_dir)
    return env


def test_setpoint_from_the_venv_bin_runs_the_webapp_to_ready() -> None:
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment")
    script = Path(sys.prefix) / "bin" / "setpoint"
    if not script.exists():
        pytest.skip(f"{script} is not installed")
    require_postgresql()
    with postgres_scratch_dir() as base:
        staged = stage_webapp(base, python=None)
        engine = Engine(base, staged.manifest, command=[script], env=without_venv(os.environ))
        runs_to_ready(staged, engine)
