"""A process-compose project as process-compose loads it, before it is translated: what a
file is, its text interpolated, several files merged, and processes' `extends` resolved.

* `file_kind(doc)` tells a parsed document apart: `"process-compose"` (a top-level
  `processes` and no `apiVersion`), `"docker-compose"` (a top-level `services` and no
  `apiVersion`), or None (anything else: a setpoint manifest, say).
* `interpolate(text, lookup, source)` substitutes `$NAME` and `${NAME...}` in a file's
  text, as process-compose does before it parses the YAML (its `envsubst`): `${NAME}`,
  `${NAME:-default}` / `${NAME-default}` (unset or empty / unset), `${NAME:=default}` /
  `${NAME=default}` (the same), `${NAME:+other}` / `${NAME+other}`, `${NAME:?message}` /
  `${NAME?message}` (refused when unset); `$$` is one `$`; an unset name is empty; any
  other `${...}` form is refused. A `$` before anything but a name or a brace is kept.
* `merge(base, override)` merges two parsed project files as process-compose does (its
  `mergo` merge, later files overriding): a scalar of the override replaces the base's
  unless it is empty (`""`, `0`, `false`, null: those never override), lists are
  appended, mappings merged field by field; `environment` (global and per process) is
  merged by variable name (the override's value wins; written back sorted, as
  process-compose writes it), a process's `namespace` is replaced, and the `vars` and
  `depends_on` mappings are merged entry by entry (an entry of the override replaces the
  base's whole entry). `processes` are merged process by process.
* `resolve_extends(processes)` gives each process with `extends: OTHER` OTHER's
  configuration merged under its own (as `merge` merges a process), recursively; a
  process that extends itself, an unknown one, or a circle of them is refused.

Pure: no I/O, no clock. Reading the files, the environment and `.env` is the caller's.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from setpoint.errors import Invalid

__all__ = ["FileKind", "file_kind", "interpolate", "merge", "resolve_extends"]

FileKind = Literal["process-compose", "docker-compose"]

_PER_ENTRY = frozenset({"vars", "depends_on", "env_cmds"})
"""Mappings merged entry by entry: an override's entry replaces the base's whole entry."""

_REFERENCE = re.compile(r"\$(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\{(?P<braced>[^}]*)\})")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-=+?])(?P<arg>.*))?", re.DOTALL)
_ESCAPED_DOLLAR = "\x00pc-dollar\x00"


def file_kind(doc: object) -> FileKind | None:
    """What a parsed document is (see the module docstring)."""
    if not isinstance(doc, Mapping) or "apiVersion" in doc:
        return None
    if "processes" in doc:
        return "process-compose"
    if "services" in doc:
        return "docker-compose"
    return None


def interpolate(text: str, lookup: Callable[[str], str | None], source: str) -> str:
    """`text` with its variables substituted (see the module docstring)."""
    escaped = text.replace("$$", _ESCAPED_DOLLAR)

    def value_of(match: re.Match[str]) -> str:
        if match.group("name") is not None:
            return lookup(match.group("name")) or ""
        braced = _BRACED.fullmatch(match.group("braced"))
        if braced is None:
            raise Invalid(f"{source}: {match.group(0)}: not a variable setpoint can substitute")
        name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
        value = lookup(name)
        if op is None:
            return value or ""
        unset = value is None or (op.startswith(":") and value == "")
        kind = op[-1]
        if kind in "-=":
            return arg if unset else (value or "")
        if kind == "+":
            return "" if unset else arg
        if unset:  # kind == "?"
            raise Invalid(f"{source}: ${{{name}}}: {arg or 'not set'}")
        return value or ""

    return _REFERENCE.sub(value_of, escaped).replace(_ESCAPED_DOLLAR, "$")


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Two parsed project files merged (see the module docstring); neither is changed."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if key == "processes" and isinstance(value, Mapping):
            processes = out.get("processes")
            merged = dict(processes) if isinstance(processes, Mapping) else {}
            for name, process in value.items():
                if isinstance(merged.get(name), Mapping) and isinstance(process, Mapping):
                    merged[name] = merge_process(merged[name], process)
                else:
                    merged[name] = copy.deepcopy(process)
            out["processes"] = merged
        else:
            _merge_field(out, key, value)
    return out


def merge_process(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """One process's configuration merged over another's (see the module docstring)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if key == "namespace":
            if not _empty(value):
                out[key] = copy.deepcopy(value)
        else:
            _merge_field(out, key, value)
    return out


def _merge_field(out: dict[str, Any], key: str, value: Any) -> None:
    if _empty(value):
        return
    current = out.get(key)
    if key == "environment":
        out[key] = _merge_environment(current, value)
    elif isinstance(current, Mapping) and isinstance(value, Mapping):
        if key in _PER_ENTRY:
            out[key] = {**current, **copy.deepcopy(dict(value))}
        else:
            merged = dict(current)
            for k, v in value.items():
                _merge_field(merged, k, v)
            out[key] = merged
    elif isinstance(current, list) and isinstance(value, list):
        out[key] = current + copy.deepcopy(value)
    else:
        out[key] = copy.deepcopy(value)


def _empty(value: Any) -> bool:
    """What Go's zero value is: never an override."""
    return value is None or value is False or value == 0 or value == "" or value in ([], {})


def _merge_environment(base: Any, override: Any) -> list[str]:
    merged = {**_environment_map(base), **_environment_map(override)}
    return sorted(f"{k}={v}" for k, v in merged.items())


def _environment_map(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        pairs = (str(item).partition("=") for item in value)
        return {k: v for k, _, v in pairs}
    return {}


def resolve_extends(processes: Mapping[str, Any]) -> dict[str, Any]:
    """`processes` with every `extends` resolved (see the module docstring)."""
    out = {name: copy.deepcopy(p) for name, p in processes.items()}
    done: set[str] = set()

    def resolve(name: str, path: tuple[str, ...]) -> None:
        if name in done:
            return
        process = out[name]
        parent = process.get("extends") if isinstance(process, Mapping) else None
        if parent is None or parent == "":
            done.add(name)
            return
        field = f"processes.{name}.extends"
        if parent == name:
            raise Invalid("a process cannot extend itself", field=field)
        if not isinstance(parent, str) or parent not in out:
            raise Invalid(f"{parent!r}: no such process", field=field)
        chain = (*path, name)
        if parent in chain:
            circle = " -> ".join((*chain[chain.index(parent) :], parent))
            raise Invalid(f"circular extends: {circle}", field=field)
        resolve(parent, chain)
        base = {k: v for k, v in out[parent].items() if k != "extends"}
        merged = merge_process(base, {k: v for k, v in process.items() if k != "extends"})
        out[name] = merged
        done.add(name)

    for name in sorted(out):
        resolve(name, ())
    return out
