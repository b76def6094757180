"""Manifest text (YAML or JSON) -> the objects it declares, within limits. Pure: no I/O.

`parse_manifests(text, source)` is what every front end calls with what a user sent
(the CLI with a file's text, the HTTP API with a request body): it refuses, as one
`Invalid` naming `source` and the line,

* text over `Limits.max_bytes` (checked before parsing: a 50 MB file costs nothing);
* YAML aliases that expand to more than `Limits.alias_budget` extra nodes (an "alias
  bomb": a few hundred bytes that expand to gigabytes), and recursive aliases;
* nesting deeper than `Limits.max_depth` (checked while composing, never by recursion);
* a key repeated in one mapping;
* values JSON cannot hold (binary, sets, NaN), integers beyond 64 bits;
* a document that is not an object.

YAML is read with the safe loader, timestamps left as strings (as Kubernetes reads
them); `kind: List` documents are unpacked. What is returned is plain JSON data: the
schema checks of `Kind.validate` come after.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from setpoint.errors import Invalid
from setpoint.model.admission import MAX_DEPTH, check_values
from setpoint.model.meta import Object

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
"""Manifest text larger than this (4 MiB) is refused before it is parsed."""

ALIAS_BUDGET = 10_000
"""How many nodes YAML aliases may add to one document when expanded."""


@dataclass(frozen=True)
class Limits:
    """What one manifest text may cost to read: bytes, nesting depth, alias expansion."""

    max_bytes: int = MAX_MANIFEST_BYTES
    max_depth: int = MAX_DEPTH
    alias_budget: int = ALIAS_BUDGET


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Manifest:
    """One object read from a manifest; `node` is its YAML node (for line numbers), if any."""

    obj: Object
    path: str
    line: int
    node: yaml.Node | None = None

    def where(self, field: str | None = None) -> str:
        """`greeting.yaml:9`: the line of `field` in this document if known, else its first line."""
        line = _field_line(self.node, field) if field else None
        return f"{self.path}:{line or self.line}"


def check_size(size: int, source: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a manifest of `size` bytes over the limit (call it before reading, too)."""
    if size > limits.max_bytes:
        raise Invalid(
            f"{source}: over the limit of {limits.max_bytes} bytes for one manifest; "
            "split it into several files"
        )


def parse_manifests(
    text: str | bytes, source: str, *, as_json: bool = False, limits: Limits = DEFAULT_LIMITS
) -> list[Manifest]:
    """The objects in one manifest's text; `source` (a file name, `stdin`, a request) is
    only used in messages. Raises `Invalid` for everything the module docstring lists."""
    check_size(len(text), source, limits)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid(f"{source}: not a text file (want UTF-8 YAML or JSON)") from None
    check_size(len(text.encode("utf-8", "surrogatepass")), source, limits)
    if as_json:
        doc = _json_document(text, source, limits)
        return _unpack(doc, None, source, 1, limits, plain=True)
    out: list[Manifest] = []
    loader: _Loader | None = None
    try:
        loader = _Loader(text, source, limits)  # reading starts here: it can fail already
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            _check_graph(node, source, limits)
            doc = loader.construct_document(node)
            if doc is not None:
                out += _unpack(doc, node, source, line, limits)
    except yaml.MarkedYAMLError as exc:
        raise Invalid(_yaml_message(exc, source)) from None
    except yaml.YAMLError as exc:
        raise Invalid(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # a safety net: the limits above keep every step shallow
        raise Invalid(f"{source}: nested too deeply to read") from None
    finally:
        if loader is not None:
            loader.dispose()
    return out


# -- JSON --------------------------------------------------------------------------------


def _json_document(text: str, source: str, limits: Limits) -> Any:
    """The value of JSON text: plain JSON data (NaN and Infinity refused), no key repeated
    in one object, nested no deeper than the limit."""
    # Nested no deeper than it has opening brackets: most texts need no closer look.
    brackets = text.count("[") + text.count("{")
    if brackets > limits.max_depth and _bracket_depth(text) > limits.max_depth:
        raise Invalid(f"{source}: nested more than {limits.max_depth} levels deep")
    if (doc := _compact_json(text)) is not None:
        return doc
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except _NotJson as exc:
        raise Invalid(f"{source}:1: only JSON values are allowed: {exc}") from None
    except json.JSONDecodeError as exc:
        raise Invalid(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise Invalid(f"{source}: duplicate key {exc.key!r} in one object") from None
    except RecursionError:
        raise Invalid(f"{source}: nested too deeply to read") from None


def _compact_json(text: str) -> Any:
    """The value of `text` when it is JSON exactly as orjson writes that value (compact, as
    programs send it), else None (then the careful parse decides). Such text repeats no
    key (the value written again would be shorter) and holds no NaN, Infinity or number
    out of a float's range (orjson reads none of them back as it wrote them)."""
    try:
        doc = orjson.loads(text)
        return doc if orjson.dumps(doc) == text.encode() else None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, UnicodeEncodeError):
        return None


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _bracket_depth(text: str) -> int:
    """How deep the brackets of JSON text nest (strings skipped), before it is parsed."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


class _NotJson(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotJson(f"{text} is out of range for a float")
    return number


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


# -- YAML --------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """Safe YAML, timestamps kept as strings, nesting limited while composing."""

    def __init__(self, text: str, source: str, limits: Limits) -> None:
        super().__init__(text)
        self._source = source
        self._limits = limits
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > self._limits.max_depth:
                event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise Invalid(
                    f"{self._source}:{line}: nested more than {self._limits.max_depth} levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _check_graph(root: yaml.Node, source: str, limits: Limits) -> None:
    """Refuse a document whose aliases expand beyond the budget, loop, or nest too deep
    when expanded, and any mapping with a repeated key. Iterative, linear in the nodes."""
    size: dict[int, int] = {}  # node id -> nodes in its expansion
    depth: dict[int, int] = {}  # node id -> levels in its expansion
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            continue
        if key in size:
            continue
        if key in on_path:
            raise Invalid(f"{_at(source, node)}: a YAML alias refers to a node that contains it")
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            _refuse_repeated_keys(node, source)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in size)
    distinct = len(size)
    if size[id(root)] - distinct > limits.alias_budget:
        raise Invalid(
            f"{_at(source, root)}: YAML aliases expand this document by "
            f"{size[id(root)] - distinct} nodes; the limit is {limits.alias_budget}"
        )
    if depth[id(root)] > limits.max_depth:
        raise Invalid(
            f"{_at(source, root)}: nested more than {limits.max_depth} levels deep "
            "(with its aliases expanded)"
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _refuse_repeated_keys(node: yaml.MappingNode, source: str) -> None:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        if key_node.value in seen:
            raise Invalid(
                f"{_at(source, key_node)}: duplicate key {key_node.value!r} in one mapping"
            )
        seen.add(key_node.value)


def _at(source: str, node: yaml.Node) -> str:
    return f"{source}:{node.start_mark.line + 1}"


def _yaml_message(exc: yaml.MarkedYAMLError, source: str) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    what = exc.problem or "invalid YAML"
    if exc.context:
        what = f"{what} ({exc.context})"
    return f"{where}: invalid YAML: {what}"


# -- documents ---------------------------------------------------------------------------


def _as_json(doc: Any, source: str, line: int, limits: Limits, *, plain: bool) -> Any:
    """`doc` as plain JSON data (keys strings), or `Invalid` if it holds what JSON cannot.
    `plain`: it is already (what `_json_document` returns): only its values are checked."""
    check_values(doc, max_depth=limits.max_depth)
    if plain:
        return doc
    try:
        return json.loads(json.dumps(doc, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise Invalid(f"{source}:{line}: only JSON values are allowed: {exc}") from None


def _unpack(
    doc: Any, node: yaml.Node | None, source: str, line: int, limits: Limits, *, plain: bool = False
) -> list[Manifest]:
    if not isinstance(doc, dict):
        raise Invalid(
            f"{source}:{line}: a manifest must be an object with apiVersion, kind and metadata, "
            f"not {type(doc).__name__}"
        )
    if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        items_node = _child(node, "items")
        out: list[Manifest] = []
        for i, item in enumerate(doc["items"]):
            item_node = _child(items_node, i)
            item_line = item_node.start_mark.line + 1 if item_node else line
            out += _unpack(item, item_node, source, item_line, limits, plain=plain)
        return out
    manifest = Manifest({}, source, line, node)
    try:
        obj = _as_json(doc, source, line, limits, plain=plain)
    except Invalid as exc:
        if exc.field is None:
            raise
        raise Invalid(f"{manifest.where(exc.field)}: {exc}") from None
    return [Manifest(obj, source, line, node)]


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
