"""process-compose's own fixture files, run as they are by `setpoint up`: each must end by
itself with the exit code process-compose's system tests expect of it.

Run with `./dev bench process_compose_fixtures PATH`, PATH a checkout of process-compose's
source (F1bonacc1/process-compose; its files are not copied into this repository). Progress
goes to stderr; the last stdout line is one JSON object.

What process-compose's src/app/system_test.go expects, and so this script:

* every `fixtures/process-compose-*.yaml` (its TestFixtures): the run ends by itself, with
  no error (exit code 0), whatever fails inside (their chain-with-errors skips two);
* `fixtures/process-compose-dependent-on-failing-log-line.yml`: its `failer` fails with
  `restart: exit_on_failure`, so the run ends with failer's exit code, 1;
* `fixtures-code/process-compose-chain-exit.yaml` (ComposeChainExit): exit code 42;
* `fixtures-code/process-compose-transitive-dep.yaml` (TransitiveDependency): the run ends,
  with exit code 0, once procA has failed and procB and procC are skipped.

Each file runs in a fresh temporary directory (its own `.setpoint/` store), with its
`.env` and `env_file`s beside it as in the checkout, under a deadline of DEADLINE seconds
(a run that does not end is a failure, and is killed with its children). Reported:
`fixtures`, `passed`, `failed` (each with what happened), the median and the slowest
seconds to the end, and the slowest file. Target: all pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEADLINE = 120.0
"""Seconds a run may take before it counts as not ending."""


def expectations(checkout: Path) -> dict[Path, int]:
    """The fixture files of `checkout` and the exit code process-compose's tests expect."""
    files = {path: 0 for path in sorted((checkout / "fixtures").glob("process-compose-*.yaml"))}
    extra = {
        "fixtures/process-compose-dependent-on-failing-log-line.yml": 1,
        "fixtures-code/process-compose-chain-exit.yaml": 42,
        "fixtures-code/process-compose-transitive-dep.yaml": 0,
    }
    for name, code in extra.items():
        if (checkout / name).is_file():
            files[checkout / name] = code
    return files


def run(fixture: Path, want: int) -> tuple[float, str | None]:
    """Seconds `setpoint up FIXTURE` took to end, and what went wrong (None: as expected)."""
    with tempfile.TemporaryDirectory(prefix="pc-fixture-") as directory:
        for sibling in fixture.parent.iterdir():  # .env, env files: beside it, as there
            if sibling.is_file():
                shutil.copy(sibling, directory)
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", fixture.name],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate()
            return DEADLINE, f"did not end within {DEADLINE:.0f} s"
        took = time.monotonic() - start
        if proc.returncode != want:
            last = [line for line in err.splitlines() if not line.startswith("warning:")][-3:]
            return took, f"exit code {proc.returncode}, want {want}: {' | '.join(last)}"
        return took, None


def main() -> None:
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "fixtures").is_dir():
        sys.exit("usage: process_compose_fixtures.py PATH (a checkout of process-compose)")
    checkout = Path(sys.argv[1]).resolve()
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    for fixture, want in expectations(checkout).items():
        name = str(fixture.relative_to(checkout))
        took, problem = run(fixture, want)
        seconds[name] = round(took, 2)
        print(f"{name}: {problem or 'as expected'} ({took:.1f} s)", file=sys.stderr)
        if problem is not None:
            failed[name] = problem
    slowest = max(seconds, key=lambda k: seconds[k])
    print(
        json.dumps(
            {
                "fixtures": len(seconds),
                "passed": len(seconds) - len(failed),
                "failed": failed,
                "seconds_p50": round(statistics.median(seconds.values()), 2),
                "seconds_max": seconds[slowest],
                "slowest": slowest,
                "targets": {"passed": len(seconds)},
                "missed": ["passed"] if failed else [],
            }
        )
    )


if __name__ == "__main__":
    main()
