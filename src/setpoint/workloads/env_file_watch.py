"""Edits of the env files a running child read (`envFile`): noticed, so that they are on
the record as an input change of the Process or Job that reads them.

A child reads its `envFile`s when it starts (`setpoint.workloads.env_files`); an edit
reaches it only at its next start, as docker compose's `env_file` and a Kubernetes
ConfigMap in an environment do: nothing is restarted for it. But the edit is news: the
next start runs with it, and when that start fails the edit is what one reverts. So the
child lifecycle keeps an `EnvFileWatch` per running child with env files and writes what
it saw in `status.envFiles` (`setpoint.workloads.child_plan.EnvFileSeen.wire()`: `path`,
`digest`, and of the last edit `changedKeys`, the keys it added, removed or changed, and
`changedAt`, when it was noticed); the recorder turns a moved `changedAt` into a `change`
entry of the object (`setpoint.insight.recorder`).

The status is read by anyone with the `view` role, so it must not let a value be guessed:
an unsalted hash of a file holding `PIN=1234` is reversed by trying the 10,000 PINs. The
digest is an HMAC-SHA-256 of the content keyed by `DigestKey`, 32 random bytes the engine
keeps in its state directory (`envfile.key`, mode 0600) and nowhere else, written as
`<key id>:<32 hex digits>` (`key id`: 8 hex digits of an HMAC of a fixed word, naming the
key without telling anything of it). A digest made with another key (another engine's
state directory) or in the old form (a bare SHA-256, before this) cannot be compared: it is
replaced at the first look, and is no edit.

* `EnvFileWatch(paths, environ, recorded, key)`: `look(now)` stats each file and reads only
  one whose inode, size or modification time moved; a file whose digest differs from the
  last one seen is an edit: `seen` gets its new digest, `changed_at=now` and the keys whose
  values differ from the values last read (not known after an engine restart: then no
  keys). `recorded` is what the stored status says (`recorded_env_files`), so an edit made
  while no engine ran is noticed at the first look. A missing or unreadable file has the
  digest `missing`. Values never leave this module: only key names and keyed digests do.
* `DigestKey.load(state_dir)` reads the key, making it on first use (a new file linked into
  place, so two engines never make two); one that cannot be read or made is replaced by a
  key for this run only, with a warning (edits across an engine restart are then not
  comparable: noticed as first seen, not as edits).

I/O: `os.stat`, file reads, the key file; no clock (the caller says when it looks).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from setpoint.errors import EnvFileUnavailable
from setpoint.files import ensure_private_dir, read_secret
from setpoint.workloads.child_plan import EnvFileSeen, recorded_env_files
from setpoint.workloads.env_files import MAX_ENV_FILE_BYTES, parse_env_file

__all__ = [
    "KEY_FILE",
    "MISSING",
    "DigestKey",
    "EnvFileSeen",
    "EnvFileWatch",
    "recorded_env_files",
]

log = logging.getLogger("setpoint.workloads")

MISSING = "missing"
"""The digest of an env file that cannot be read."""
KEY_FILE = "envfile.key"
"""The file in a controller's state directory that holds its env-file digest key."""
_KEY_BYTES = 32


@dataclass(frozen=True, slots=True, repr=False)
class DigestKey:
    """The key of env files' digests: never written anywhere but its own file, never shown
    (its `repr` says only its id)."""

    secret: bytes

    @property
    def id(self) -> str:
        """8 hex digits that name the key (an HMAC of a fixed word: nothing of the key)."""
        return hmac.new(self.secret, b"setpoint envFile key id", hashlib.sha256).hexdigest()[:8]

    def __repr__(self) -> str:
        return f"DigestKey(id={self.id})"

    def digest(self, data: bytes) -> str:
        """`<key id>:<HMAC-SHA-256 of data, first 32 hex digits>`."""
        mac = hmac.new(self.secret, data, hashlib.sha256).hexdigest()[:32]
        return f"{self.id}:{mac}"

    def made_this(self, digest: str) -> bool:
        """Whether `digest` can be compared with this key's: made with it, or `missing`."""
        return digest == MISSING or digest.startswith(f"{self.id}:")

    @classmethod
    def new(cls) -> DigestKey:
        """A fresh random key (kept nowhere: for one run, or a test)."""
        return cls(secrets.token_bytes(_KEY_BYTES))

    @classmethod
    def load(cls, state_dir: str | os.PathLike[str]) -> DigestKey:
        """The key kept in `<state_dir>/envfile.key`, made there on first use; a key for
        this run only (and a warning) when it cannot be read or made."""
        path = Path(state_dir) / KEY_FILE
        try:
            return cls._read(path) or cls._make(path)
        except (OSError, ValueError) as exc:
            log.warning("env file digests: %s; using a key for this run only", exc)
            return cls.new()

    @classmethod
    def _read(cls, path: Path) -> DigestKey | None:
        try:
            text = read_secret(path, what="env file digest key").strip()
        except FileNotFoundError:
            return None
        secret = bytes.fromhex(text)
        if len(secret) != _KEY_BYTES:
            raise ValueError(f"{path}: not a key ({len(secret)} bytes, want {_KEY_BYTES})")
        return cls(secret)

    @classmethod
    def _make(cls, path: Path) -> DigestKey:
        """Write a new key to a temporary file and link it into place: when another made one
        first, the link fails and theirs is the key."""
        ensure_private_dir(path.parent)
        key = cls.new()
        fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(key.secret.hex() + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(partial, path)
            except FileExistsError:
                found = cls._read(path)
                if found is None:
                    raise
                return found
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
        return key


class EnvFileWatch:
    """Notices edits of a child's env files (see the module docstring)."""

    def __init__(
        self,
        paths: Sequence[str],
        environ: Mapping[str, str],
        recorded: Mapping[str, EnvFileSeen],
        key: DigestKey,
    ) -> None:
        self._paths = list(dict.fromkeys(paths))
        self._environ = environ
        self._key = key
        self._stats: dict[str, tuple[int, int, int] | None] = {}
        self._values: dict[str, dict[str, str] | None] = {}
        self.seen: dict[str, EnvFileSeen] = {}
        for path in self._paths:
            was = recorded.get(path)
            if was is not None:  # a digest it cannot compare: not known
                known = was.digest if key.made_this(was.digest) else ""
                self.seen[path] = EnvFileSeen(path, known, was.changed_keys, was.changed_at)

    def items(self) -> list[EnvFileSeen]:
        """What was seen, in the spec's order."""
        return [self.seen[p] for p in self._paths if p in self.seen]

    def look(self, now: float) -> bool:
        """Look at every file once (`now`: the time an edit is noticed at); True when what
        `items()` says changed: an edit, a file seen for the first time, or a digest that
        could not be compared replaced."""
        changed = False
        for path in self._paths:
            changed = self._look_at(path, now) or changed
        return changed

    def _look_at(self, path: str, now: float) -> bool:
        try:
            st = os.stat(path)
            stat_key: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stat_key = None
        if path in self._stats and self._stats[path] == stat_key:
            return False
        self._stats[path] = stat_key
        data = self._read(path) if stat_key is not None else None
        digest = MISSING if data is None else self._key.digest(data)
        values = self._parse(path, data)
        before = self.seen.get(path)
        old_values = self._values.get(path)
        self._values[path] = values
        if before is not None and before.digest == digest:
            return False
        if before is None:  # first seen: no edit
            self.seen[path] = EnvFileSeen(path, digest)
            return True
        if not before.digest:  # a digest it could not compare, replaced: no edit either
            self.seen[path] = EnvFileSeen(path, digest, before.changed_keys, before.changed_at)
            return True
        keys: tuple[str, ...] = ()
        if old_values is not None and values is not None:
            keys = tuple(
                sorted(k for k in {*old_values, *values} if old_values.get(k) != values.get(k))
            )
        self.seen[path] = EnvFileSeen(path, digest, keys, now)
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
