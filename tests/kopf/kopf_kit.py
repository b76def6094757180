"""Helpers of the kopf test: kopf's released sdist (which ships its examples/ and its own
tests/e2e suite) fetched, checked and unpacked, and that suite run as it is against a real
`setpoint serve`, with only the kubeconfig (and the pinned kubectl on PATH) pointing there.

The sdist is the one uv.lock pins for kopf (its address and sha256), fetched with urllib
as ./dev fetches uv, and kept unpacked under ~/.cache/setpoint (XDG_CACHE_HOME), so a
machine that has it needs no network. A fetch that fails is a skip naming why, and a
failure under CI=true. Nothing of kopf's is copied into this repository.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

SUITE_TIMEOUT = 900.0
"""Seconds the whole suite may take before the test fails (never waited out: it takes
about two and a half minutes)."""

TEARDOWN_RACE = (
    "ignore:unclosed transport <_SelectorSocketTransport:ResourceWarning",
    "ignore:unclosed <socket.socket:ResourceWarning",
)
"""Warning filters for one race of kopf's own teardown, not of the API: when an example
ends, kopf closes its watch streams (TLS: it sends close_notify and waits for the
server's) and KopfRunner's event loop closes at once. When the server's close_notify (any
server's) arrives after that, as it may on a loaded machine, the socket is collected
unclosed, and kopf's `filterwarnings = error` makes that ResourceWarning fail the example.
Only these two warnings (an unclosed socket, an unclosed socket transport) are let
through; any other still fails it."""

EXAMPLE_TIMEOUT = 120
"""pytest-timeout of each example in kopf's suite (their CI gives 30 s on a quiet
machine; ./dev test shares the CPU with other workers)."""


@dataclass(frozen=True)
class Sdist:
    """kopf's sdist as uv.lock pins it."""

    version: str
    url: str
    sha256: str

    @classmethod
    def locked(cls) -> Sdist:
        with (ROOT / "uv.lock").open("rb") as lock:
            (kopf,) = [p for p in tomllib.load(lock)["package"] if p["name"] == "kopf"]
        sdist = kopf["sdist"]
        return cls(kopf["version"], sdist["url"], sdist["hash"].removeprefix("sha256:"))


def cache_directory() -> Path:
    """Where setpoint's test tools are cached (as ./dev caches uv)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.environ.get("HOME") or os.getcwd(), ".cache"
    )
    return Path(base) / "setpoint"


def kopf_tree() -> Path:
    """kopf's sdist, unpacked in the cache (fetched and checked the first time); a skip
    naming why it could not be fetched, a failure under CI=true."""
    sdist = Sdist.locked()
    tree = cache_directory() / f"kopf-{sdist.version}-{sdist.sha256[:12]}"
    if (tree / "tests" / "e2e" / "test_examples.py").is_file():
        return tree
    try:
        with urllib.request.urlopen(sdist.url, timeout=120) as response:
            data = response.read()
    except OSError as exc:
        reason = f"could not fetch kopf's sdist from {sdist.url} ({exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    if hashlib.sha256(data).hexdigest() != sdist.sha256:
        pytest.fail(f"sha256 of {sdist.url.rsplit('/', 1)[1]} is not the one uv.lock pins")
    partial = tree.with_name(f"{tree.name}.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(partial, filter="data")
    (top,) = partial.iterdir()  # kopf-VERSION/
    try:
        top.rename(tree)
    except OSError:  # another worker unpacked it first
        if not tree.is_dir():
            raise
    shutil.rmtree(partial, ignore_errors=True)
    return tree


@dataclass(frozen=True)
class SuiteRun:
    """What kopf's e2e suite said: each example's outcome, and its output."""

    outcomes: dict[str, str]
    """Example folder -> passed, failed, error or skipped."""
    output: str

    def passed(self) -> list[str]:
        return [name for name, outcome in self.outcomes.items() if outcome == "passed"]

    def report(self) -> str:
        lines = [f"{name}: {outcome}" for name, outcome in self.outcomes.items()]
        return "\n".join(lines)


def run_e2e_suite(
    tree: Path, kubeconfig: Path, kubectl: str, work: Path, only: list[str] | None = None
) -> SuiteRun:
    """kopf's tests/e2e, run by pytest in a child process from the sdist's top (its paths
    are relative to it), as kopf's CI runs it (`pytest --only-e2e`): KUBECONFIG names
    setpoint's server; the pinned kubectl is first on PATH. Its pyproject's `addopts`
    (`--looptime`, a plugin only its unit tests use) are replaced by `--strict-markers`;
    `TEARDOWN_RACE` names the only warnings let through; the plugin `oscrypto_openssl3` lets
    kopf's WebhookServer make its certificate here. `only`: just these examples."""
    report = work / f"kopf-e2e-{len(list(work.glob('kopf-e2e*.xml')))}.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    env |= {
        "KUBECONFIG": str(kubeconfig),
        "PATH": os.pathsep.join([str(Path(kubectl).parent), env.get("PATH", "")]),
        "HOME": str(work / "home"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(Path(__file__).parent),  # for -p oscrypto_openssl3
    }
    (work / "home").mkdir(exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--only-e2e",
        f"--timeout={EXAMPLE_TIMEOUT}",
        "-o",
        "addopts=--strict-markers",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "oscrypto_openssl3",
        f"--junitxml={report}",
        *(f"-W{rule}" for rule in TEARDOWN_RACE),
        *(["-k", " or ".join(only)] if only else []),
        "-q",
        "tests/e2e",
    ]
    proc = subprocess.run(
        argv, cwd=tree, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT
    )
    output = proc.stdout + proc.stderr
    if not report.is_file():
        pytest.fail(f"kopf's e2e suite left no report (exit {proc.returncode}):\n{output}")
    return SuiteRun(_outcomes(ElementTree.parse(report).getroot()), output)


def _outcomes(root: Any) -> dict[str, str]:
    """Each example's outcome in a JUnit XML report (test ids end in `[EXAMPLE]`)."""
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        example = name.partition("[")[2].rstrip("]") or name
        found = {child.tag for child in case}
        outcome = next((tag for tag in ("error", "failure", "skipped") if tag in found), "passed")
        if outcome == "failure":
            outcome = "failed"
        outcomes[example] = outcome if example not in outcomes else "error"
    return dict(sorted(outcomes.items()))
