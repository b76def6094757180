"""Edits of the env files a running child read (`envFile`): noticed, so that they are on
the record as an input change of the Process that reads them.

A child reads its `envFile`s when it starts (`setpoint.workloads.env_files`); an edit
reaches it only at its next start, as docker compose's `env_file` and a Kubernetes
ConfigMap in an environment do: nothing is restarted for it. But the edit is news: the
next start runs with it, and when that start fails the edit is what one reverts. So the
Process controller keeps an `EnvFileWatch` per running child with env files and writes
what it saw in `status.envFiles` (`EnvFileSeen.wire()`: `path`, `digest`, and
`changedKeys`, the keys the last edit added, removed or changed); the recorder turns a
changed digest into a `change` entry of the Process (`setpoint.insight.recorder`).

* `EnvFileWatch(paths, environ, recorded)`: `look()` stats each file and reads only one
  whose inode, size or modification time moved; a file whose content digest (SHA-256,
  first 16 hex digits) differs from the last one seen is an edit: `seen` gets its new
  digest and the keys whose values differ from the values last read (not known after an
  engine restart: then no keys, only the digest). `recorded` is what the stored status
  says (path -> digest), so an edit made while no engine ran is noticed at the first look.
  A missing or unreadable file has the digest `missing`. Values never leave this module:
  only key names and digests do.

I/O: `os.stat` and file reads; no clock (the caller says when to look).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.errors import EnvFileUnavailable
from setpoint.workloads.env_files import MAX_ENV_FILE_BYTES, parse_env_file

__all__ = ["MISSING", "EnvFileSeen", "EnvFileWatch", "recorded_digests"]

MISSING = "missing"
"""The digest of an env file that cannot be read."""


@dataclass(frozen=True, slots=True)
class EnvFileSeen:
    """One env file as last seen: its content's `digest`, and the keys its last edit
    changed (empty: not known, or no edit yet)."""

    path: str
    digest: str
    changed_keys: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        """Its `status.envFiles` item."""
        out: dict[str, Any] = {"path": self.path, "digest": self.digest}
        if self.changed_keys:
            out["changedKeys"] = list(self.changed_keys)
        return out


def recorded_digests(status: Mapping[str, Any]) -> dict[str, str]:
    """path -> digest of a stored status's `envFiles`."""
    items = status.get("envFiles")
    return {
        str(i["path"]): str(i["digest"])
        for i in (items if isinstance(items, list) else [])
        if isinstance(i, Mapping) and i.get("path") and i.get("digest")
    }


class EnvFileWatch:
    """Notices edits of a child's env files (see the module docstring)."""

    def __init__(
        self, paths: Sequence[str], environ: Mapping[str, str], recorded: Mapping[str, str]
    ) -> None:
        self._paths = list(dict.fromkeys(paths))
        self._environ = environ
        self._stats: dict[str, tuple[int, int, int] | None] = {}
        self._values: dict[str, dict[str, str] | None] = {}
        self.seen: dict[str, EnvFileSeen] = {
            p: EnvFileSeen(p, recorded[p]) for p in self._paths if p in recorded
        }

    def items(self) -> list[EnvFileSeen]:
        """What was seen, in the spec's order."""
        return [self.seen[p] for p in self._paths if p in self.seen]

    def look(self) -> bool:
        """Look at every file once; True when one was seen to change (or seen at all for
        the first time)."""
        changed = False
        for path in self._paths:
            changed = self._look_at(path) or changed
        return changed

    def _look_at(self, path: str) -> bool:
        try:
            st = os.stat(path)
            key: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        if path in self._stats and self._stats[path] == key:
            return False
        self._stats[path] = key
        data = self._read(path) if key is not None else None
        digest = MISSING if data is None else hashlib.sha256(data).hexdigest()[:16]
        values = self._parse(path, data)
        before = self.seen.get(path)
        old_values = self._values.get(path)
        self._values[path] = values
        if before is not None and before.digest == digest:
            return False
        keys: tuple[str, ...] = ()
        if before is not None and old_values is not None and values is not None:
            keys = tuple(
                sorted(k for k in {*old_values, *values} if old_values.get(k) != values.get(k))
            )
        self.seen[path] = EnvFileSeen(path, digest, keys)
        return True

    @staticmethod
    def _read(path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_ENV_FILE_BYTES + 1)
        except OSError:
            return None
        return data

    def _parse(self, path: str, data: bytes | None) -> dict[str, str] | None:
        if data is None or len(data) > MAX_ENV_FILE_BYTES or b"\0" in data:
            return None
        with contextlib.suppress(EnvFileUnavailable):
            return parse_env_file(data.decode("utf-8", "surrogateescape"), path, self._environ.get)
        return None
