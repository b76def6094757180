"""Reading what the user points the CLI at: manifest files and the modules that define kinds.

The files are read here (each one's size checked before it is read); their text is
parsed and limited by `setpoint.model.manifests.parse_manifests`, the code the HTTP
API calls too. Every failure is a `setpoint.errors.Invalid` whose message names the
file and, where there is one, the line: a missing or oversized file, YAML or JSON that
does not parse or exceeds a limit, a document that is not an object. Kind modules are
loaded by `setpoint.cli.kind_modules` (re-exported here), which imports no YAML.
Nothing here touches a store.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

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


def read_manifests(paths: Sequence[str], stdin: BinaryIO | None = None) -> list[Manifest]:
    """Every object in `paths`, in order: files, directories (their *.yaml, *.yml and
    *.json files, sorted, not recursive) and `-` for stdin. `kind: List` is unpacked.
    Every file is parsed (within `manifest_limits()`) before any object is returned."""
    limits = manifest_limits()
    out: list[Manifest] = []
    for path in paths:
        if path == "-":
            data = (stdin or sys.stdin.buffer).read(limits.max_bytes + 1)
            out += parse_manifests(data, "stdin", limits=limits)
            continue
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in MANIFEST_SUFFIXES and f.is_file())
            for f in files:
                out += parse_manifests(
                    _read(f, limits), str(f), as_json=f.suffix == ".json", limits=limits
                )
        else:
            out += parse_manifests(
                _read(p, limits), path, as_json=p.suffix == ".json", limits=limits
            )
    return out


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
