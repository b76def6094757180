"""Reading what the user points the CLI at: manifest files and the modules that define kinds.

The files are read here (each one's size checked before it is read); their text is
parsed and limited by `setpoint.model.manifests.parse_manifests`, the code the HTTP
API calls too. Every failure is a `setpoint.errors.Invalid` whose message names the
file and, where there is one, the line: a missing or oversized file, YAML or JSON that
does not parse or exceeds a limit, a document that is not an object. Kind modules are
loaded by `setpoint.cli.kind_modules` (re-exported here), which imports no YAML.
A process-compose file (`processes:` at the top, no `apiVersion`) is read, with the other
process-compose files given, by `setpoint.cli.compose_files` and translated into manifests;
`add_compose_namespace_option` gives a verb process-compose's `-n NS` (a selection of its
namespaces) as `--compose-namespace NS`. Nothing here touches a store.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from setpoint.cli import compose_files
from setpoint.cli.kind_modules import KINDS_HINT, load_kinds
from setpoint.errors import Invalid
from setpoint.model import Kind, Object, Registry
from setpoint.model.manifests import (
    DEFAULT_LIMITS,
    Limits,
    Manifest,
    check_size,
    parse_manifests,
)

__all__ = [
    "KINDS_HINT",
    "MANIFEST_SUFFIXES",
    "Manifest",
    "add_compose_namespace_option",
    "compose_project_here",
    "identify",
    "load_kinds",
    "manifest_limits",
    "parse_manifests",
    "read_manifests",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_limits() -> Limits:
    """The parsing limits: the defaults, with `SETPOINT_MAX_MANIFEST_BYTES` if set."""
    raw = os.environ.get("SETPOINT_MAX_MANIFEST_BYTES")
    if raw is None:
        return DEFAULT_LIMITS
    if not raw.isdigit() or int(raw) < 1:
        raise Invalid(f"SETPOINT_MAX_MANIFEST_BYTES={raw!r}: want a positive number of bytes")
    return Limits(max_bytes=int(raw))


def add_compose_namespace_option(parser: argparse.ArgumentParser) -> None:
    """`--compose-namespace NS` (repeatable; `args.compose_namespaces`), for
    `read_manifests`: process-compose's `-n NS` (setpoint's `-n` is its own namespace)."""
    parser.add_argument(
        "--compose-namespace",
        dest="compose_namespaces",
        action="append",
        default=[],
        metavar="NS",
        help="only the processes of a process-compose file in this namespace (its "
        "`namespace:`; `default` when it names none), as process-compose's -n NS; repeatable",
    )


def read_manifests(
    paths: Sequence[str],
    stdin: BinaryIO | None = None,
    *,
    compose_namespaces: Sequence[str] = (),
) -> list[Manifest]:
    """Every object in `paths`, in order: files, directories (their *.yaml, *.yml and
    *.json files, sorted, not recursive) and `-` for stdin. `kind: List` is unpacked.
    Every file is parsed (within `manifest_limits()`) before any object is returned.

    process-compose files (`setpoint.cli.compose_files`) are read as process-compose
    reads them: all of them merged in order into one project (a directory holding one
    gives its default file and override), translated, in the place of the first, and
    what the translation does not honour is printed once on stderr (`warning: ...`).
    `compose_namespaces`: only their processes in any of these namespaces (refused when
    no process-compose file is given)."""
    limits = manifest_limits()
    out: list[Manifest] = []
    compose: list[Path] = []
    compose_at = 0

    def read(path: Path) -> bytes:
        return _read(path, limits)

    def add_compose(files: list[Path]) -> None:
        nonlocal compose_at
        if not compose:
            compose_at = len(out)
        compose.extend(files)

    for path in paths:
        if path == "-":
            data = (stdin or sys.stdin.buffer).read(limits.max_bytes + 1)
            parsed = parse_manifests(data, "stdin", limits=limits)
            if compose_files.sniff(parsed, "stdin"):
                raise Invalid("stdin: a process-compose file: give its path, not stdin")
            out += parsed
            continue
        p = Path(path)
        if p.is_dir():
            found = compose_files.default_files(p, read, limits)
            if found is not None:
                add_compose(found)
                continue
            files = sorted(f for f in p.iterdir() if f.suffix in MANIFEST_SUFFIXES and f.is_file())
            for f in files:
                out += _parse_file(f, str(f), limits, add_compose)
        else:
            out += _parse_file(p, path, limits, add_compose)
    if compose_namespaces and not compose:
        raise Invalid("--compose-namespace: no process-compose file given")
    if compose:
        translated, warnings = compose_files.read_project(
            compose, read, limits, namespaces=compose_namespaces
        )
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        out[compose_at:compose_at] = translated
    return out


def compose_project_here() -> list[str]:
    """What `setpoint up` with no PATH reads, as process-compose with no `-f`: `["."]` when
    the working directory holds a process-compose file (`compose_files.default_files`:
    `process-compose.yaml` and the others, with its override), else none."""
    limits = manifest_limits()
    found = compose_files.default_files(Path("."), lambda p: _read(p, limits), limits)
    return ["."] if found is not None else []


def _parse_file(
    path: Path, source: str, limits: Limits, add_compose: Callable[[list[Path]], None]
) -> list[Manifest]:
    """The manifests of one file; none when it is a process-compose file (it is handed to
    `add_compose`, to be merged with the others)."""
    parsed = parse_manifests(
        _read(path, limits), source, as_json=path.suffix == ".json", limits=limits
    )
    if compose_files.sniff(parsed, source):
        add_compose([path])
        return []
    return parsed


def _read(path: Path, limits: Limits) -> bytes:
    """The file's bytes; its size is checked before it is read."""
    try:
        with path.open("rb") as f:
            check_size(os.fstat(f.fileno()).st_size, str(path), limits)
            return f.read(limits.max_bytes + 1)
    except FileNotFoundError:
        raise Invalid(f"{path}: no such file or directory") from None
    except IsADirectoryError:
        raise Invalid(f"{path}: is a directory") from None
    except OSError as exc:
        raise Invalid(f"{path}: {exc.strerror or exc}") from None


def identify(
    manifest: Manifest, registry: Registry, namespace: str, namespace_explicit: bool
) -> tuple[Kind, Object]:
    """The manifest's kind, and a copy of its object with the namespace filled in.

    A namespaced object without `metadata.namespace` goes to `namespace`; one
    whose namespace differs from an explicit `-n` is refused, as kubectl does.
    """
    obj: Object = copy.deepcopy(manifest.obj)
    try:
        kind = registry.for_object(obj)
    except Invalid as exc:
        raise type(exc)(f"{manifest.where(exc.field)}: {exc}") from None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise Invalid(f"{manifest.where()}: metadata: required: an object with at least a name")
    if kind.namespaced:
        given = meta.get("namespace")
        if given and namespace_explicit and given != namespace:
            raise Invalid(
                f"{manifest.where('metadata.namespace')}: the namespace from the manifest "
                f'"{given}" does not match the namespace "{namespace}" given with -n'
            )
        meta["namespace"] = given or namespace
    return kind, obj
