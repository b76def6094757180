"""`setpoint.cli.logstream`, in process: one object's log read with the times the log
holder's writer (`LogFile`) stamped, across rotations, with unfinished lines held back;
how a line is printed; several logs merged by time. Real files; the times are chosen."""

from __future__ import annotations

import os
from pathlib import Path

from setpoint.cli.logstream import (
    PALETTE,
    LineStyle,
    LogFollower,
    LogLine,
    colour_of,
    in_time_order,
    rfc3339_nano,
)
from setpoint.workloads.log_holder import LogFile

T = 1_700_000_000 * 10**9
MS = 10**6


def writer(tmp_path: Path, max_bytes: int = 10**6) -> LogFile:
    return LogFile(str(tmp_path / "default_web.log"), max_bytes, 3)


def texts(lines: list[LogLine]) -> list[tuple[int, bytes]]:
    return [(line.at, line.text) for line in lines]


def test_each_line_has_the_time_its_first_byte_was_read(tmp_path: Path) -> None:
    log = writer(tmp_path)
    log.write(b"one\ntw", T)
    log.write(b"o\nthree\n", T + MS)
    log.write(b"four\n", T + 2 * MS - 1)  # within 1 ms of the last record: shares its time
    follower = LogFollower(tmp_path, "default", "web")
    expected = [(T, b"one"), (T, b"two"), (T + MS, b"three"), (T + MS, b"four")]
    assert texts(follower.backlog()) == expected
    assert texts(follower.backlog(tail=1)) == expected[-1:]
    assert texts(follower.backlog(since=T + MS)) == expected[-2:]


def test_an_unfinished_line_waits_for_its_end_unless_final(tmp_path: Path) -> None:
    log = writer(tmp_path)
    log.write(b"done\nhalf", T)
    follower = LogFollower(tmp_path, "default", "web")
    assert texts(follower.backlog(final=False)) == [(T, b"done")]
    assert follower.poll() == []
    log.write(b" and the rest\n", T + 5)
    assert texts(follower.poll()) == [(T, b"half and the rest")]
    assert texts(LogFollower(tmp_path, "default", "web").backlog(tail=1)) == [
        (T, b"half and the rest")
    ]


def test_rotation_keeps_every_line_and_its_time(tmp_path: Path) -> None:
    log = writer(tmp_path, max_bytes=10)
    log.write(b"line 00\n", T)
    follower = LogFollower(tmp_path, "default", "web")
    seen = follower.backlog(final=False)
    for i in range(1, 12):  # 8 bytes a line: a rotation every other line, 3 backups kept
        log.write(b"line %02d\n" % i, T + i * MS)
        seen += follower.poll()  # a look between two rotations sees all (as `tail -F`)
    assert texts(seen) == [(T + n * MS, b"line %02d" % n) for n in range(12)]
    kept = LogFollower(tmp_path, "default", "web").backlog()
    assert texts(kept) == [(T + n * MS, b"line %02d" % n) for n in range(6, 12)]  # what is kept
    # --tail reads rotated files only as far back as it needs.
    assert texts(LogFollower(tmp_path, "default", "web").backlog(tail=3)) == [
        (T + n * MS, b"line %02d" % n) for n in range(9, 12)
    ]


def test_lines_of_an_older_holder_get_the_next_recorded_time_or_the_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "default_web.log"
    path.write_bytes(b"before the upgrade\n")
    os.utime(path, ns=(T - 7, T - 7))
    assert texts(LogFollower(tmp_path, "default", "web").backlog()) == [
        (T - 7, b"before the upgrade")
    ]
    writer(tmp_path).write(b"after\n", T)  # a new holder takes over the same file
    assert texts(LogFollower(tmp_path, "default", "web").backlog()) == [
        (T, b"before the upgrade"),
        (T, b"after"),
    ]


def test_an_index_of_another_file_is_ignored(tmp_path: Path) -> None:
    writer(tmp_path).write(b"old\n", T)
    path = tmp_path / "default_web.log"
    path.unlink()
    path.write_bytes(b"new file, old index\n")  # another inode
    os.utime(path, ns=(T + 9, T + 9))
    assert texts(LogFollower(tmp_path, "default", "web").backlog()) == [
        (T + 9, b"new file, old index")
    ]


def test_how_a_line_is_printed() -> None:
    line = LogLine(T + 5, "db", b"ready")
    assert LineStyle().render(line) == b"ready\n"
    style = LineStyle(prefix=True, timestamps=True)
    style.fit(["db", "web-0"])
    assert style.render(line) == b"db    | 2023-11-14T22:13:20.000000005Z ready\n"
    colour = colour_of("db")
    assert LineStyle(prefix=True, colour=True).render(line) == (
        b"\x1b[%dmdb\x1b[0m | ready\n" % colour
    )
    assert colour in PALETTE
    assert rfc3339_nano(T) == "2023-11-14T22:13:20.000000000Z"


def test_several_logs_merge_by_time_keeping_each_ones_order() -> None:
    a = [LogLine(1, "a", b"1"), LogLine(3, "a", b"3"), LogLine(3, "a", b"3 again")]
    b = [LogLine(2, "b", b"2"), LogLine(3, "b", b"3")]
    merged = [(line.name, line.text) for line in in_time_order([a, b])]
    assert merged == [("a", b"1"), ("b", b"2"), ("a", b"3"), ("a", b"3 again"), ("b", b"3")]
