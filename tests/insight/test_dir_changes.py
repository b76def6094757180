"""`DirectoryChanges` and the `LogTailer` on it, against a real directory: the names the
kernel reports, what happens when it cannot say, and logs followed through both."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setpoint.insight.dir_changes import DirectoryChanges
from setpoint.insight.recorder import LogTailer


def test_it_names_the_files_written_created_moved_and_deleted(tmp_path: Path) -> None:
    (tmp_path / "old.log").write_text("x\n")
    changes = DirectoryChanges(tmp_path)
    try:
        assert changes.take() == set()
        with open(tmp_path / "old.log", "a") as f:
            f.write("more\n")
        (tmp_path / "new.log").write_text("y\n")
        assert changes.take() == {"old.log", "new.log"}
        assert changes.take() == set()
        os.replace(tmp_path / "old.log", tmp_path / "old.log.1")
        (tmp_path / "new.log").unlink()
        assert changes.take() == {"old.log", "old.log.1", "new.log"}
    finally:
        changes.close()


def test_it_cannot_say_until_the_directory_is_there_and_after_it_is_replaced(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    changes = DirectoryChanges(logs)
    try:
        assert changes.take() is None  # no directory yet
        logs.mkdir()
        assert changes.take() is None  # watched from now on; what came before is not known
        (logs / "a.log").write_text("a\n")
        assert changes.take() == {"a.log"}
        shutil.rmtree(logs)
        logs.mkdir()
        (logs / "b.log").write_text("b\n")
        assert changes.take() is None  # the directory it watched is gone
        (logs / "c.log").write_text("c\n")
        assert changes.take() == {"c.log"}
    finally:
        changes.close()


def test_the_tailer_reads_the_logs_changed_and_every_log_when_it_cannot_tell(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    tailer = LogTailer(logs)  # the directory comes later
    try:
        assert tailer.poll() == []
        logs.mkdir()
        (logs / "default_db.log").write_text("db up\n")
        (logs / "default_my.logger.log").write_text("dotted name\n")
        assert tailer.poll() == [("default_db", "db up"), ("default_my.logger", "dotted name")]
        for _ in range(3):
            assert tailer.poll() == []
        with open(logs / "default_my.logger.log", "a") as f:
            f.write("again\n")
        assert tailer.poll() == [("default_my.logger", "again")]
    finally:
        tailer.close()
