"""The real `setpoint up` in a terminal 80 columns wide (a pseudo-terminal): whole names, a
detail line naming the root blocker with a command, `--logs` showing the children's
output; and `explain`'s table cut to `COLUMNS` (`-o wide` whole).

The terminal's output is read as it comes, with a timeout, until what the test waits for
is on it; no sleeps. Escape sequences are taken out before lines are measured.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_kit import CLI, REPO, Running

TIMEOUT = 120.0
"""Seconds the engine may take to reach what a test waits for (never waited out)."""
WIDTH = 80
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
MOVE = re.compile(r"\x1b\[[0-9;?]*[A-Za-ln-z]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")
"""Cursor moves and erasures (a redraw): where a line of the screen ends."""

INIT = "payments-reconciliation-database-init"
DB = "payments-reconciliation-database"
API = "payments-reconciliation-api-server"
FAILS = (
    "import sys; print('pg.py: the postgres user cannot reach /root/x: /root is not "
    "searchable by it', file=sys.stderr); sys.exit(3)"
)


def manifest(kind: str, name: str, token: str, code: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"args": [sys.executable, "-c", code, token], **spec},
    }


def chain(cli: CLI, token: str) -> Path:
    """A Job that fails at once, a Process that waits for it, one that waits for that."""
    app = cli.directory / "app"
    app.mkdir()
    docs = [
        manifest("Job", INIT, token, FAILS, backoffLimit=0),
        manifest(
            "Process",
            DB,
            token,
            "import time; time.sleep(600)",
            dependsOn=[{"kind": "Job", "name": INIT, "condition": "Complete"}],
        ),
        manifest(
            "Process",
            API,
            token,
            "import time; time.sleep(600)",
            dependsOn=[{"kind": "Process", "name": DB}],
        ),
    ]
    (app / "app.yaml").write_text(yaml.safe_dump_all(docs))
    return app


class Terminal:
    """`setpoint up ARGS` on a pseudo-terminal `WIDTH` columns wide."""

    def __init__(self, cli: CLI, *args: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, WIDTH, 0, 0))
        env = {**cli.env, "COLUMNS": str(WIDTH), "LINES": "40", "TERM": "xterm-256color"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cli.directory,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.raw = b""

    @property
    def text(self) -> str:
        screen = self.raw.decode("utf-8", "replace").replace("\r\n", "\n")
        return COLOUR.sub("", MOVE.sub("\n", screen))

    def lines(self) -> list[str]:
        return self.text.split("\n")

    def read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False once the terminal is closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the command ended and closed the terminal
            return False
        self.raw += data
        return bool(data)

    def wait_for(self, *texts: str) -> None:
        """Read until every one of `texts` has been on the screen; fail after TIMEOUT."""
        deadline = time.monotonic() + TIMEOUT
        while not all(t in self.text for t in texts):
            if time.monotonic() > deadline or not self.read(0.5):
                self.proc.kill()
                pytest.fail(f"never saw {texts}; the screen: {self.text[-3000:]}")

    def stop(self) -> int:
        """SIGTERM, read to the end, the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + TIMEOUT
        while self.read(0.5) and time.monotonic() < deadline:
            pass
        code = self.proc.wait(timeout=TIMEOUT)
        os.close(self.master)
        return code


def test_up_at_80_columns_shows_whole_names_and_the_root_blocker(cli: CLI, token: str) -> None:
    term = Terminal(cli, str(chain(cli, token)))
    term.wait_for(
        f"→ setpoint explain job/{INIT}",
        f"Process/{API}",
        f"  ↳ Job/{INIT}: BackoffLimitExceeded: the job fa",
    )
    assert term.stop() == 0
    lines = term.lines()
    too_long = [line for line in lines if len(line) > WIDTH]
    assert not too_long
    for ref in (f"Job/{INIT} ", f"Process/{DB} ", f"Process/{API} "):
        assert any(line.startswith(ref) for line in lines), ref
    # api waits for db, db for init: api's detail names init (the root), not db
    at = max(i for i, line in enumerate(lines) if line.startswith(f"Process/{API} "))
    assert lines[at + 1].startswith(f"  ↳ Job/{INIT}: BackoffLimitExceeded: the job fa")
    assert lines[at + 2].strip() == f"→ setpoint describe job/{INIT}"
    # colours: the failed Job's row red, the waiting Processes' yellow
    raw = term.raw.decode("utf-8", "replace")
    assert re.search(r"\x1b\[31m" + re.escape(f"Job/{INIT} "), raw)
    assert re.search(r"\x1b\[33m" + re.escape(f"Process/{DB} "), raw)


CHATTY = (
    "import sys, time\n"
    "for i in range(3): print(f'chatty line {i} ' + 'x' * 100, flush=True)\n"
    "time.sleep(600)"
)


def test_up_logs_shows_the_childrens_output_under_the_live_view(cli: CLI, token: str) -> None:
    app = cli.directory / "app"
    app.mkdir()
    (app / "chatty.yaml").write_text(yaml.safe_dump(manifest("Process", "chatty", token, CHATTY)))
    term = Terminal(cli, "--logs", str(app))
    term.wait_for("── logs ─", "chatty | chatty line 2 xxx")
    assert term.stop() == 0
    lines = term.lines()
    assert not [line for line in lines if len(line) > WIDTH]
    shown = [line for line in lines if line.startswith("chatty | chatty line 2 ")]
    assert shown[-1].endswith("x…")  # cut to the width


def test_up_logs_without_a_terminal_prints_each_line_after_its_name(cli: CLI, token: str) -> None:
    app = cli.directory / "app"
    app.mkdir()
    (app / "chatty.yaml").write_text(yaml.safe_dump(manifest("Process", "chatty", token, CHATTY)))
    up = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", "--logs", str(app)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cli.directory,
            env=cli.env,
        )
    )
    for i in range(3):
        line = up.expect(lambda line, i=i: line.startswith(f"chatty | chatty line {i} "), "a line")
        assert line == f"chatty | chatty line {i} " + "x" * 100  # whole: nothing to fit
    assert up.stop(signal.SIGTERM)[0] == 0


EXAMPLE = REPO / "docs" / "examples" / "explain_timeline.jsonl"


def test_explain_fits_its_table_in_columns_and_wide_shows_every_reason(cli: CLI) -> None:
    args = ("explain", "--timeline", str(EXAMPLE), "deployment/web")
    table = cli(*args, env={"COLUMNS": "80"}, store=False, kinds=False)
    assert table.code == 0, table
    reasons = [c["reason"] for c in cli(*args, "-o", "json", store=False, kinds=False).json()]
    assert all(len(line) <= 80 for line in table.lines), table.out
    assert table.lines[1].split() == ["RANK", "SCORE", "WHEN", "ENTRY", "PATH", "REASON"]
    rows = table.lines[2:]
    assert len(rows) == len(reasons)
    for row, reason in zip(rows, reasons, strict=True):
        assert row.endswith("…")
        assert reason.startswith(row.split("   ")[-1].strip().removesuffix("…"))
    wide = cli(*args, "-o", "wide", env={"COLUMNS": "80"}, store=False, kinds=False)
    assert wide.code == 0, wide
    assert all(line.endswith(r) for line, r in zip(wide.lines[2:], reasons, strict=True))
