"""`envFile`: variables a child gets from files, as docker compose's `env_file`.

* `parse_env_file(text)` reads one file's text, pure, the way docker compose parses an
  `env_file` (`KEY=VALUE` lines):

  - blank lines and lines starting with `#` are skipped; `export ` before a key is allowed;
    a key is letters, digits, `_` and `.`; spaces around the key and the `=` are dropped;
  - an unquoted value runs to the end of the line, without an inline comment (a `#` after
    a space) and trailing spaces; its backslashes are kept;
  - a single-quoted value is literal (`\\'` is a quote); a double-quoted value turns
    `\\n`, `\\r`, `\\t` into a line feed, carriage return and tab, and `\\x` into `x`
    (`\\\\`, `\\"`, `\\$`); either may span lines, and may be followed by a comment;
  - a line that is a key alone (`KEY`) takes the engine's own value of it, if it has one
    (`INHERITED`), else sets nothing.

  `$` is kept as written: values are not interpolated (docker compose would expand
  `${VAR}` in unquoted and double-quoted values).
* `read_env_files(paths, environ)` reads the files in order (a later one wins), relative
  to the engine's working directory (the directory `up` runs in). A file that is missing,
  unreadable, larger than `MAX_ENV_FILE_BYTES` or malformed raises `EnvFileUnavailable`
  with one line naming the file (and line): the lifecycle retries the start with back-off,
  since the file, not the spec, has to change.

Pure but for `read_env_files` (file reads): no other I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from setpoint.errors import EnvFileUnavailable

__all__ = ["INHERITED", "MAX_ENV_FILE_BYTES", "parse_env_file", "read_env_files"]

MAX_ENV_FILE_BYTES = 1024 * 1024
"""The largest env file read (a bigger one is refused, not read)."""
INHERITED = None
"""The value `parse_env_file` gives a key written alone: the engine's value, if any."""

_KEY = re.compile(r"[A-Za-z0-9_.]+")
_DOUBLE_QUOTED_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}


def parse_env_file(text: str, source: str = "") -> dict[str, str | None]:
    """The variables of one env file's `text`, in order (see the module docstring); a key
    written alone maps to `INHERITED`. Raises `EnvFileUnavailable` (`envFile SOURCE:LINE:
    why`) for a line it cannot read. Pure."""

    def malformed(why: str, line: int) -> EnvFileUnavailable:
        return EnvFileUnavailable(f"envFile {source}:{line}: {why}")

    found: dict[str, str | None] = {}
    pos, line = 0, 1
    end = len(text)
    while pos < end:
        newline = text.find("\n", pos)
        stop = end if newline < 0 else newline
        stripped = text[pos:stop].strip()
        if not stripped or stripped.startswith("#"):
            pos, line = stop + 1, line + 1
            continue
        statement = text[pos:stop].lstrip()
        if statement.startswith("export ") or statement.startswith("export\t"):
            statement = statement[len("export") :].lstrip()
        offset = stop - len(statement)  # where the key starts
        key, eq, _ = statement.partition("=")
        key = key.strip()
        if not _KEY.fullmatch(key):
            what = "no key before '='" if not key else f"{key!r} is not a variable name"
            raise malformed(what, line)
        if not eq:
            found[key] = INHERITED
            pos, line = stop + 1, line + 1
            continue
        value_at = offset + statement.index("=") + 1
        while value_at < end and text[value_at] in " \t":
            value_at += 1
        quote = text[value_at] if value_at < end else ""
        if quote in ("'", '"'):
            value, after = _quoted(text, value_at)
            if after < 0:
                raise malformed(f"{key}: the value opened with {quote} is not closed", line)
            tail_end = text.find("\n", after)
            tail_end = end if tail_end < 0 else tail_end
            tail = text[after:tail_end].strip()
            if tail and not tail.startswith("#"):
                raise malformed(f"{key}: unexpected {tail[:20]!r} after the closing quote", line)
            found[key] = value
            line += text.count("\n", pos, tail_end) + 1
            pos = tail_end + 1
            continue
        raw = text[value_at:stop]
        comment = re.search(r"\s#", raw)
        found[key] = (raw[: comment.start()] if comment else raw).rstrip()
        pos, line = stop + 1, line + 1
    return found


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The value of the quoted string at `start` (a quote), and where it ends (past the
    closing quote; -1 when it is not closed)."""
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            if quote == "'":
                out.append("'" if following == "'" else "\\" + following)
            else:
                out.append(_DOUBLE_QUOTED_ESCAPES.get(following, following))
            i += 2
            continue
        if char == quote:
            return "".join(out), i + 1
        out.append(char)
        i += 1
    return "".join(out), -1


def read_env_files(paths: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of the env files at `paths`, read now and in order (a later file wins;
    a key written alone takes its value from `environ`, the engine's environment).

    Raises `EnvFileUnavailable`, one line naming the file (and the line), for a file that
    cannot be read, is larger than `MAX_ENV_FILE_BYTES`, is malformed, or holds a NUL byte.
    Bytes that are not UTF-8 reach the child as they are (surrogate escapes)."""
    env: dict[str, str] = {}
    for path in paths:
        try:
            with Path(path).open("rb") as f:
                data = f.read(MAX_ENV_FILE_BYTES + 1)
        except OSError as exc:
            raise EnvFileUnavailable(f"envFile {path}: {exc.strerror or exc}") from None
        if len(data) > MAX_ENV_FILE_BYTES:
            raise EnvFileUnavailable(f"envFile {path}: larger than {MAX_ENV_FILE_BYTES} bytes")
        if b"\0" in data:
            line = data.count(b"\n", 0, data.index(b"\0")) + 1
            raise EnvFileUnavailable(f"envFile {path}:{line}: holds a NUL byte")
        parsed = parse_env_file(data.decode("utf-8", "surrogateescape"), str(path))
        for key, value in parsed.items():
            if value is not INHERITED:
                env[key] = value
            elif key in environ:
                env[key] = environ[key]
    return env
