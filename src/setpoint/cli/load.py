"""Reading what the user points the CLI at: manifest files and the modules that define kinds.

Every failure is a `setpoint.errors.Invalid` whose message names the file and,
where there is one, the line: a missing file, YAML or JSON that does not parse,
a document that is not an object, a kind module that cannot be imported or has no
`register(registry)` function.
Nothing here touches a store.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import yaml

from setpoint.errors import Error, Invalid
from setpoint.model import Kind, Object, Registry

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

KINDS_HINT = "kinds come from --kinds MODULE_OR_FILE or SETPOINT_KINDS"
"""Added to every unknown-kind message the CLI prints."""


@dataclass(frozen=True)
class Manifest:
    """One object read from a file; `node` is its YAML node (for line numbers), if any."""

    obj: Object
    path: str
    line: int
    node: yaml.Node | None = None

    def where(self, field: str | None = None) -> str:
        """`greeting.yaml:9`: the line of `field` in this document if known, else its first line."""
        line = _field_line(self.node, field) if field else None
        return f"{self.path}:{line or self.line}"


class _Loader(yaml.SafeLoader):
    """Safe YAML, but timestamps stay strings, as Kubernetes reads them."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> list[Manifest]:
    """Every object in `paths`, in order: files, directories (their *.yaml, *.yml and
    *.json files, sorted, not recursive) and `-` for stdin. `kind: List` is unpacked."""
    out: list[Manifest] = []
    for path in paths:
        if path == "-":
            out += parse_manifests((stdin or sys.stdin).read(), "stdin")
            continue
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in MANIFEST_SUFFIXES and f.is_file())
            for f in files:
                out += parse_manifests(_read(f), str(f), as_json=f.suffix == ".json")
        else:
            out += parse_manifests(_read(p), path, as_json=p.suffix == ".json")
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Invalid(f"{path}: no such file or directory") from None
    except UnicodeDecodeError:
        raise Invalid(f"{path}: not a text file (want UTF-8 YAML or JSON)") from None
    except OSError as exc:
        raise Invalid(f"{path}: {exc.strerror or exc}") from None


def parse_manifests(text: str, path: str, *, as_json: bool = False) -> list[Manifest]:
    """The objects in one file's text; `path` is only used in messages."""
    if as_json:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise Invalid(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        return _unpack(doc, None, path, 1)
    out: list[Manifest] = []
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            doc = loader.construct_document(node)
            if doc is not None:
                out += _unpack(doc, node, path, node.start_mark.line + 1)
    except yaml.MarkedYAMLError as exc:
        raise Invalid(_yaml_message(exc, path)) from None
    except yaml.YAMLError as exc:
        raise Invalid(f"{path}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return out


def _yaml_message(exc: yaml.MarkedYAMLError, path: str) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
    what = exc.problem or "invalid YAML"
    if exc.context:
        what = f"{what} ({exc.context})"
    return f"{where}: invalid YAML: {what}"


def _unpack(doc: Any, node: yaml.Node | None, path: str, line: int) -> list[Manifest]:
    if not isinstance(doc, dict):
        raise Invalid(
            f"{path}:{line}: a manifest must be an object with apiVersion, kind and metadata, "
            f"not {type(doc).__name__}"
        )
    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        items_node = _child(node, "items")
        out: list[Manifest] = []
        for i, item in enumerate(doc["items"]):
            item_node = _child(items_node, i)
            item_line = item_node.start_mark.line + 1 if item_node else line
            out += _unpack(item, item_node, path, item_line)
        return out
    return [Manifest(doc, path, line, node)]


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    """The value node under `key` (a mapping key or a sequence index), or None."""
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v  # type: ignore[no-any-return]
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]  # type: ignore[no-any-return]
    return None


_FIELD_PART = re.compile(r"\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]|([^.\[\]]+)")


def _field_line(node: yaml.Node | None, field: str) -> int | None:
    """The line of the deepest part of `field` (`spec.items[0].name`) present in the document."""
    line = None
    for index, quoted, dquoted, plain in _FIELD_PART.findall(field):
        key: str | int = int(index) if index else (quoted or dquoted or plain)
        if isinstance(node, yaml.MappingNode) and isinstance(key, str):
            pair = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, yaml.ScalarNode) and k.value == key
                ),
                None,
            )
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        else:
            child = _child(node, key)
            if child is None:
                break
            line, node = child.start_mark.line + 1, child
    return line


def identify(
    manifest: Manifest, registry: Registry, namespace: str, namespace_explicit: bool
) -> tuple[Kind, Object]:
    """The manifest's kind, and a copy of its object with the namespace filled in.

    A namespaced object without `metadata.namespace` goes to `namespace`; one
    whose namespace differs from an explicit `-n` is refused, as kubectl does.
    """
    try:
        obj: Object = json.loads(json.dumps(manifest.obj))
    except (TypeError, ValueError) as exc:
        raise Invalid(f"{manifest.where()}: only JSON values are allowed: {exc}") from None
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


def load_kinds(specs: Iterable[str], registry: Registry) -> None:
    """Import each module (`pkg.kinds`) or file (`path/kinds.py`) and call its
    `register(registry)`, which adds its kinds to `registry`."""
    seen: set[str] = set()
    for raw in specs:
        spec = raw.strip()
        if not spec or spec in seen:
            continue
        seen.add(spec)
        if spec.endswith(".py") or "/" in spec or os.sep in spec:
            module = _load_file(spec)
        else:
            module = _load_module(spec)
        register = getattr(module, "register", None)
        if not callable(register):
            raise Invalid(
                f"--kinds {spec}: defines no register(registry) function to add its kinds"
            )
        try:
            register(registry)
        except Exception as exc:
            raise Invalid(f"--kinds {spec}: {_describe(exc)}") from exc


def _load_file(spec: str) -> ModuleType:
    path = Path(spec).resolve()
    if not path.is_file():
        raise Invalid(f"--kinds {spec}: no such file")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_setpoint_kinds_{stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise Invalid(f"--kinds {spec}: cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # pydantic resolves annotations through sys.modules
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise Invalid(f"--kinds {spec}: {_describe(exc)}") from exc
    return module


def _load_module(spec: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and spec.startswith(exc.name):
            raise Invalid(
                f"--kinds {spec}: no module named {exc.name!r} (give an importable module "
                "or a .py file)"
            ) from None
        raise Invalid(f"--kinds {spec}: {_describe(exc)}") from exc
    except Exception as exc:
        raise Invalid(f"--kinds {spec}: {_describe(exc)}") from exc


def _describe(exc: Exception) -> str:
    """`ValueError at kinds.py:12: bad thing`: enough to find a bug in a user's kind module."""
    if isinstance(exc, Error):
        return str(exc)
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at {exc.filename}:{exc.lineno}: {exc.msg}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}: {exc}"
