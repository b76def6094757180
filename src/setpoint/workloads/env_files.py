"""`envFile`: variables a child gets from files, as docker compose's `env_file`.

* `parse_env_file(text, source, lookup)` reads one file's text, pure, the way docker
  compose parses an `env_file` (`KEY=VALUE` lines):

  - blank lines and lines starting with `#` are skipped; `export ` before a key is allowed;
    a key is letters, digits, `_` and `.`; spaces around the key and the `=` are dropped;
  - an unquoted value runs to the end of the line, without an inline comment (a `#` after
    a space) and trailing spaces; its backslashes are kept;
  - a single-quoted value is literal (`\\'` is a quote); a double-quoted value turns
    `\\n`, `\\r`, `\\t` into a line feed, carriage return and tab, and `\\x` into `x`
    (`\\\\`, `\\"`, `\\$`); either may span lines, and may be followed by a comment;
  - unquoted and double-quoted values are interpolated: `$VAR`, `${VAR}`,
    `${VAR:-default}` / `${VAR-default}` (unset or empty / unset), `${VAR:+other}` /
    `${VAR+other}`, `${VAR:?message}` / `${VAR?message}` (a malformed file if unset), and
    `$$` for one `$`; a variable is looked up among those set earlier, then in `lookup`,
    and is empty if unset;
  - a line that is a key alone (`KEY`) takes its value from `lookup`, if set there.
* `read_env_files(paths, environ)` reads the files in order (a later one wins), relative
  to the engine's working directory (the directory `up` runs in). A file that is missing,
  unreadable, larger than `MAX_ENV_FILE_BYTES` or malformed raises `EnvFileUnavailable`
  with one line naming the file (and line): the lifecycle retries the start with back-off,
  since the file, not the spec, has to change.

Pure but for `read_env_files` (file reads): no other I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from setpoint.errors import EnvFileUnavailable

__all__ = ["MAX_ENV_FILE_BYTES", "Lookup", "parse_env_file", "read_env_files"]

MAX_ENV_FILE_BYTES = 1024 * 1024
"""The largest env file read (a bigger one is refused, not read)."""

_KEY = re.compile(r"[A-Za-z0-9_.]+")
_DOUBLE_QUOTED_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_REFERENCE = (
    r"\$(?:(?P<dollar>\$)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-+?])(?P<arg>[^}]*))?\})"
)
_UNQUOTED = re.compile(_REFERENCE)
_DOUBLE_QUOTED = re.compile(r"\\(?P<escaped>[\s\S])|" + _REFERENCE)

Lookup = Callable[[str], "str | None"]
"""A variable's value by name, None when it is not set."""


def _nothing(_: str) -> str | None:
    return None


def parse_env_file(text: str, source: str = "", lookup: Lookup = _nothing) -> dict[str, str]:
    """The variables of one env file's `text`, in order (see the module docstring).
    References (`${VAR}`) and keys written alone take their values from the variables
    set earlier in the file, then from `lookup`. Raises `EnvFileUnavailable` (`envFile
    SOURCE:LINE: why`) for a line it cannot read. Pure (but for what `lookup` does)."""
    found: dict[str, str] = {}

    def resolve(name: str) -> str | None:
        return found[name] if name in found else lookup(name)

    pos, line = 0, 1
    end = len(text)
    while pos < end:
        newline = text.find("\n", pos)
        stop = end if newline < 0 else newline
        stripped = text[pos:stop].strip()
        if not stripped or stripped.startswith("#"):
            pos, line = stop + 1, line + 1
            continue

        where = f"envFile {source}:{line}"
        statement = text[pos:stop].lstrip()
        if statement.startswith(("export ", "export\t")):
            statement = statement[len("export") :].lstrip()
        offset = stop - len(statement)  # where the key starts
        key, eq, _ = statement.partition("=")
        key = key.strip()
        if not _KEY.fullmatch(key):
            what = "no key before '='" if not key else f"{key!r} is not a variable name"
            raise EnvFileUnavailable(f"{where}: {what}")
        if not eq:
            inherited = lookup(key)
            if inherited is not None:
                found[key] = inherited
            pos, line = stop + 1, line + 1
            continue
        value_at = offset + statement.index("=") + 1
        while value_at < end and text[value_at] in " \t":
            value_at += 1
        quote = text[value_at] if value_at < end else ""
        if quote in ("'", '"'):
            raw, after = _quoted(text, value_at)
            if after < 0:
                raise EnvFileUnavailable(
                    f"{where}: {key}: the value opened with {quote} is not closed"
                )
            tail_end = text.find("\n", after)
            tail_end = end if tail_end < 0 else tail_end
            tail = text[after:tail_end].strip()
            if tail and not tail.startswith("#"):
                raise EnvFileUnavailable(
                    f"{where}: {key}: unexpected {tail[:20]!r} after the closing quote"
                )
            if quote == "'":
                found[key] = raw.replace("\\'", "'")
            else:
                found[key] = _expand(_DOUBLE_QUOTED, raw, resolve, f"{where}: {key}")
            line += text.count("\n", pos, tail_end) + 1
            pos = tail_end + 1
            continue
        raw = text[value_at:stop]
        comment = re.search(r"\s#", raw)
        raw = (raw[: comment.start()] if comment else raw).rstrip()
        found[key] = _expand(_UNQUOTED, raw, resolve, f"{where}: {key}")
        pos, line = stop + 1, line + 1
    return found


def _quoted(text: str, start: int) -> tuple[str, int]:
    """What is between the quote at `start` and its closing quote (a backslash escapes the
    next character, which is kept as written), and where it ends (past the closing quote;
    -1 when it is not closed)."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return text[start + 1 : i], i + 1
        i += 1
    return text[start + 1 :], -1


def _expand(
    pattern: re.Pattern[str],
    raw: str,
    resolve: Lookup,
    where: str,
) -> str:
    """`raw` with its escapes (double quotes) and references (`$VAR`, `${VAR}`,
    `${VAR:-default}`, `${VAR-default}`, `${VAR:+other}`, `${VAR+other}`, `${VAR:?error}`,
    `${VAR?error}`, `$$`) replaced; an unset variable is empty. `where` (`envFile
    PATH:LINE: KEY`) begins the message of a `${VAR?error}` whose variable is unset."""

    def replace(match: re.Match[str]) -> str:
        groups = match.groupdict()
        if groups.get("escaped") is not None:
            return _DOUBLE_QUOTED_ESCAPES.get(groups["escaped"], groups["escaped"])
        if groups["dollar"]:
            return "$"
        name = groups["name"] or groups["braced"]
        value = resolve(name)
        op, arg = groups["op"], groups["arg"] or ""
        if op is None:
            return value or ""
        unset = value is None or (op.startswith(":") and value == "")
        if op.endswith("-"):
            return arg if unset else str(value)
        if op.endswith("+"):
            return "" if unset else arg
        if unset:
            raise EnvFileUnavailable(f"{where}: {name} {arg or 'is not set'}")
        return str(value)

    return pattern.sub(replace, raw)


def read_env_files(paths: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of the env files at `paths`, read now and in order (a later file wins).
    References and keys written alone look up the variables of earlier files, then
    `environ` (the engine's environment).

    Raises `EnvFileUnavailable`, one line naming the file (and the line), for a file that
    cannot be read, is larger than `MAX_ENV_FILE_BYTES`, is malformed, or holds a NUL byte.
    Bytes that are not UTF-8 reach the child as they are (surrogate escapes)."""
    env: dict[str, str] = {}

    def lookup(name: str) -> str | None:
        return env[name] if name in env else environ.get(name)

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
        env.update(parse_env_file(data.decode("utf-8", "surrogateescape"), str(path), lookup))
    return env
