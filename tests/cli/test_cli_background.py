"""`setpoint up -d`'s engine log: appended to, and moved aside once it has grown too big."""

from __future__ import annotations

from pathlib import Path

from setpoint.cli.background import LOG_KEEP_BYTES, start_engine


async def test_a_log_grown_too_big_is_moved_aside_when_an_engine_starts(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with log.open("wb") as f:
        f.write(b"an earlier engine's line\n")
        f.truncate(LOG_KEEP_BYTES)  # sparse: big without writing it
    # `--version` prints and ends at once: an engine that stopped before it was up.
    started = await start_engine(["--version"], log, within=60)
    assert started.applied is None
    assert (tmp_path / "engine.log.1").stat().st_size == LOG_KEEP_BYTES
    assert (tmp_path / "engine.log.1").read_bytes().startswith(b"an earlier engine's line")
    lines = log.read_text().splitlines()
    assert lines[0].startswith("--- setpoint up -d, ")
    assert len(log.read_bytes()) < 1000


async def test_a_small_log_is_appended_to(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("an earlier engine's line\n")
    await start_engine(["--version"], log, within=60)
    assert log.read_text().splitlines()[0] == "an earlier engine's line"
    assert not (tmp_path / "engine.log.1").exists()
