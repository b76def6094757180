"""CLI start-up benchmark: how long `setpoint --help` and `setpoint get processes` take,
against a bare Python start.

Run with `./dev bench cli` (or `uv run python bench/cli.py`). Progress goes to stderr;
the last stdout line is one JSON object. Takes well under a minute.

Every command is a fresh process started as a user starts it: the console script
`setpoint` beside this interpreter (`.venv/bin/setpoint`; the wrapper counts), else
`python -m setpoint`. The store is a SQLite file in a fresh temporary directory holding
OBJECTS Process objects, written by `setpoint apply` once before timing; the commands
run with that directory as their working directory. The machine may be shared and
noisy, so the three commands run in ROUNDS interleaved rounds (each round in a
different order, after one untimed warm-up of each) and the figures are medians.
Bytecode is cached as on a user's machine: PYTHONDONTWRITEBYTECODE is not passed on (the
warm-up writes the `.pyc` files; without them every run compiles setpoint anew).

What is measured, and the key it is reported under:

* `python_ms`: `python -c pass` with this same interpreter (the floor);
* `help_ms`: `setpoint --help`;
* `get_ms`: `setpoint get processes` (a table of OBJECTS rows);
* `ratio_help_vs_python`, `ratio_get_vs_python`: the two above over `python_ms`;
* `runs_ms`: every timed run, for information.

Targets (reported under `targets` / `missed`, never asserted): ratio_help_vs_python
<= 4, ratio_get_vs_python <= 6 (issue 12).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROUNDS = 10
OBJECTS = 100
TARGETS = {"ratio_help_vs_python": 4.0, "ratio_get_vs_python": 6.0}


def log(message: str) -> None:
    print(f"[bench cli {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def setpoint_command() -> list[str]:
    """The console script beside this interpreter, else `python -m setpoint`."""
    script = Path(sys.executable).parent / "setpoint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "setpoint"]


def manifest(count: int) -> str:
    return "".join(
        f"---\napiVersion: setpoint.dev/v1alpha1\nkind: Process\n"
        f"metadata: {{name: proc-{i:03d}, labels: {{app: bench}}}}\n"
        f'spec: {{args: [python3, -c, "pass"]}}\n'
        for i in range(count)
    )


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Milliseconds from start to exit of `command`; it must succeed."""
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{command}: exit {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SETPOINT_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    setpoint = setpoint_command()
    root = Path(tempfile.mkdtemp(prefix="setpoint-bench-cli-"))
    try:
        (root / "procs.yaml").write_text(manifest(OBJECTS))
        subprocess.run(
            [*setpoint, "apply", "-f", "procs.yaml"],
            cwd=root,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        listed = subprocess.run(
            [*setpoint, "get", "processes", "-o", "name"],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        log(f"{len(listed)} Process objects in {root}; command: {' '.join(setpoint)}")
        commands = {
            "python": [sys.executable, "-c", "pass"],
            "help": [*setpoint, "--help"],
            "get": [*setpoint, "get", "processes"],
        }
        for command in commands.values():
            timed(command, root, env)  # warm-up: page cache, bytecode
        runs: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for round_ in range(ROUNDS):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                runs[name].append(timed(commands[name], root, env))
            log(f"round {round_ + 1}: " + ", ".join(f"{n} {runs[n][-1]:.0f} ms" for n in names))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "command": " ".join(Path(part).name for part in setpoint),
        "objects": len(listed),
        "rounds": ROUNDS,
        "python_ms": round(medians["python"], 1),
        "help_ms": round(medians["help"], 1),
        "get_ms": round(medians["get"], 1),
        "ratio_help_vs_python": round(medians["help"] / medians["python"], 2),
        "ratio_get_vs_python": round(medians["get"] / medians["python"], 2),
        "runs_ms": {name: [round(v, 1) for v in values] for name, values in runs.items()},
    }
    result["targets"] = {key: f"<= {bound:g}" for key, bound in TARGETS.items()}
    result["missed"] = [key for key, bound in TARGETS.items() if result[key] > bound]
    log(f"targets missed: {result['missed'] or 'none'}")
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
