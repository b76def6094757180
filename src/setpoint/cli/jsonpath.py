"""kubectl's JSONPath templates and custom columns, for `setpoint get -o jsonpath=...` and
`-o custom-columns=...`, printing what kubectl prints for the same objects.

kubectl's dialect (k8s.io/client-go/util/jsonpath), not RFC 9535's: a template is text with
actions in braces. Inside one: `.field` (`.a\\.b` for a key with a dot), `['key']`, `[n]`,
`[start:end:step]` (negative from the end), `[*]` / `.*`, `[a,b]` (a union), `..field`
(recursive descent), filters `[?(@.x == "y")]` with `==`, `!=`, `<`, `<=`, `>`, `>=`
or a bare path (it exists), `@` and `$` (the current object),
string literals `"\\n"` (Go's escapes), numbers, `true`/`false`, and `range EXPR` ... `end`
repeating what is between for each value. The values of one action are printed joined
with single spaces: a string as it is, an object or a list as compact JSON (keys sorted,
`<`, `>`, `&` escaped, as Go's encoder), a number as Go prints a float64 (`3`, `1.5`,
`1e+06`). A missing key prints nothing (kubectl's `--allow-missing-template-keys`, on by
default); an index out of range, or a filter comparing what cannot be compared, is an error.

`Template(text)` parses (`Invalid` naming the problem), `template.render(data)` prints;
`custom_columns(spec)` parses `HEADER:.path,...` and `columns.table(objects)` lays the
rows out as kubectl's tab writer does, each value as Go's `%v` prints it (`[a b]`). Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from setpoint.errors import Invalid

__all__ = ["Columns", "Template", "custom_columns", "text_of"]


# -- the parsed form ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    name: str


@dataclass(frozen=True, slots=True)
class Wildcard:
    pass


@dataclass(frozen=True, slots=True)
class Recursive:
    pass


@dataclass(frozen=True, slots=True)
class Slice:
    start: int | None
    end: int | None
    step: int | None
    single: bool  # `[n]`: one element


@dataclass(frozen=True, slots=True)
class Union:
    parts: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class Filter:
    left: Path
    op: str  # "exists" for a bare path
    right: Path


@dataclass(frozen=True, slots=True)
class Literal:
    value: str | int | float | bool
    text: bool  # a quoted string: one value whatever the input


@dataclass(frozen=True, slots=True)
class Keyword:
    name: str  # "range" or "end"


Step: TypeAlias = Field | Wildcard | Recursive | Slice | Union | Filter | Literal | Keyword
Path: TypeAlias = tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Action:
    path: Path


@dataclass(frozen=True, slots=True)
class Range:
    path: Path
    body: tuple[Node, ...]


Node: TypeAlias = Text | Action | Range


# -- parsing --------------------------------------------------------------------------------

_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")
_SLICE = re.compile(r"(-?\d*)(:-?\d*)?(:-?\d*)?")
_FILTER = re.compile(r"([^!<>=]+)([!<>=]+)(.+?)")
_OPERATORS = ("==", "!=", "<", ">", "<=", ">=")


class _Parser:
    """One action's text, read left to right as kubectl's parser reads it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def path(self) -> Path:
        steps: list[Step] = []
        text = self.text
        while self.pos < len(text):
            rest = text[self.pos :]
            char = text[self.pos]
            if rest.startswith("[?("):
                steps.append(self._filter())
            elif rest.startswith(".."):
                if steps and isinstance(steps[-1], Recursive):
                    raise Invalid("invalid multiple recursive descent")
                self.pos += 2
                steps.append(Recursive())
                if self.pos < len(text) and _word_char(text[self.pos]):
                    steps.append(self._field())
            elif char in " @$":
                self.pos += 1
            elif char == "[":
                steps.extend(self._bracket())
            elif char in "\"'":
                steps.append(Literal(self._quoted(char), text=True))
            elif char == ".":
                self.pos += 1
                steps.append(self._field())
            elif char in "+-" or char.isdigit():
                steps.append(self._number())
            elif _word_char(char):
                steps.append(self._identifier())
            elif char in "\r\n":
                raise Invalid("unclosed action")
            else:
                raise Invalid(f"unrecognized character in action: {char!r}")
        return tuple(steps)

    def _field(self) -> Field | Wildcard:
        start = self.pos
        text = self.text
        while self.pos < len(text):
            if text[self.pos] == "\\":
                self.pos += 2
                continue
            if text[self.pos] in _TERMINATORS:
                break
            self.pos += 1
        name = text[start : self.pos]
        return Wildcard() if name == "*" else Field(name.replace("\\", ""))

    def _identifier(self) -> Literal | Keyword:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _TERMINATORS:
            self.pos += 1
        word = self.text[start : self.pos]
        if word in ("true", "false"):
            return Literal(word == "true", text=False)
        if word not in ("range", "end"):
            raise Invalid(f"unrecognized identifier {word}")
        return Keyword(word)

    def _number(self) -> Literal:
        start = self.pos
        if self.text[self.pos] in "+-":
            self.pos += 1
        while self.pos < len(self.text) and (
            self.text[self.pos].isdigit() or self.text[self.pos] == "."
        ):
            self.pos += 1
        word = self.text[start : self.pos]
        try:
            return Literal(int(word), text=False)
        except ValueError:
            pass
        try:
            return Literal(float(word), text=False)
        except ValueError:
            raise Invalid(f"cannot parse number {word}") from None

    def _quoted(self, quote: str) -> str:
        start = self.pos
        self.pos += 1
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise Invalid("unterminated quoted string")
            if self.text[self.pos] == quote and self.text[self.pos - 1] != "\\":
                break
            self.pos += 1
        self.pos += 1
        return _unquote(self.text[start : self.pos])

    def _bracket(self) -> list[Step]:
        end = self.text.find("]", self.pos)
        newline = self.text.find("\n", self.pos)
        if end < 0 or 0 <= newline < end:
            raise Invalid("unterminated array")
        inside = self.text[self.pos + 1 : end]
        self.pos = end + 1
        if inside == "*":
            inside = ":"
        parts = inside.split(",")
        if len(parts) > 1:
            return [Union(tuple(_Parser(f"[{p.strip()}]").path() for p in parts))]
        key = re.fullmatch(r"'([^']*)'", inside)
        if key is not None:
            return list(_Parser(f".{key.group(1)}").path())
        match = _SLICE.fullmatch(inside)
        if match is None:
            raise Invalid(f"invalid array index {inside}")
        start, stop, step = (_int_or_none(g.lstrip(":") if g else None) for g in match.groups())
        return [Slice(start, stop, step, single=match.group(2) is None)]

    def _filter(self) -> Filter:
        self.pos += 3
        start = self.pos
        opened = closed = False
        pair = ""
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise Invalid("unterminated filter")
            char = self.text[self.pos]
            self.pos += 1
            if char in "\"'":
                if not opened:
                    opened, pair = True, char
                elif char == pair and self.text[self.pos - 2] != "\\":
                    closed = True
            elif char == ")" and opened == closed:
                break
        if self.pos >= len(self.text) or self.text[self.pos] != "]":
            raise Invalid("unclosed array expect ]")
        inside = self.text[start : self.pos - 1]
        self.pos += 1
        match = _FILTER.fullmatch(inside)
        if match is None:
            return Filter(_Parser(inside).path(), "exists", ())
        op = match.group(2)
        if op not in _OPERATORS:
            raise Invalid(f"unrecognized filter operator {op}")
        return Filter(_Parser(match.group(1)).path(), op, _Parser(match.group(3)).path())


def _word_char(char: str) -> bool:
    return char == "_" or char.isalnum()


def _int_or_none(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise Invalid(f"array index {text} is not a number") from None


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote(quoted: str) -> str:
    """A quoted string as Go's `strconv.Unquote` reads it (single quotes too)."""
    quote, body = quoted[0], quoted[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1 : i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in ("\\", quote, '"', "'"):
            out.append(code)
            i += 2
        elif code in ("x", "u", "U"):
            size = {"x": 2, "u": 4, "U": 8}[code]
            digits = body[i + 2 : i + 2 + size]
            if len(digits) != size or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise Invalid(f"unquote string {quoted} error invalid syntax")
            out.append(chr(int(digits, 16)))
            i += 2 + size
        else:
            raise Invalid(f"unquote string {quoted} error invalid syntax")
    return "".join(out)


def _parse_template(text: str) -> tuple[Node, ...]:
    """The template's texts and actions, `range` ... `end` nested."""
    stack: list[tuple[Path | None, list[Node]]] = [(None, [])]
    pos = 0
    while pos < len(text):
        brace = text.find("{", pos)
        if brace < 0:
            stack[-1][1].append(Text(text[pos:]))
            break
        if brace > pos:
            stack[-1][1].append(Text(text[pos:brace]))
        parser = _Parser(text)
        parser.pos = brace + 1
        close = _action_end(text, brace + 1)
        parser.text = text[:close]
        path = parser.path()
        pos = close + 1
        if path and path[0] == Keyword("range"):
            stack.append((path[1:], []))
        elif path and path[0] == Keyword("end"):
            if len(stack) == 1:
                raise Invalid("not in range, nothing to end")
            range_path, body = stack.pop()
            assert range_path is not None
            stack[-1][1].append(Range(range_path, tuple(body)))
        elif any(isinstance(step, Keyword) for step in path):
            raise Invalid("range and end begin an action")
        else:
            stack[-1][1].append(Action(path))
    if len(stack) > 1:
        raise Invalid("range without end")
    return tuple(stack[0][1])


def _action_end(text: str, pos: int) -> int:
    """Where the action that starts at `pos` ends (its `}`), skipping quoted strings."""
    quote = ""
    while pos < len(text):
        char = text[pos]
        if quote:
            if char == quote and text[pos - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "}":
            return pos
        elif char in "\r\n":
            break
        pos += 1
    raise Invalid("unclosed action")


# -- evaluation -----------------------------------------------------------------------------


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _evaluate(path: Path, values: list[Any]) -> list[Any]:
    for step in path:
        values = _step(step, values)
    return values


def _step(step: Step, values: list[Any]) -> list[Any]:
    match step:
        case Field(name):
            return [v[name] for v in values if isinstance(v, dict) and name in v]
        case Wildcard():
            return [c for v in values for c in _children(v)]
        case Recursive():
            return [d for v in values for d in _descend(v)]
        case Slice():
            return [item for v in values if v is not None for item in _slice(step, v)]
        case Union(parts):
            return [r for part in parts for r in _evaluate(part, values)]
        case Filter():
            return [item for v in values for item in _filter(step, v)]
        case Literal(value, text=True):
            return [value]
        case Literal(value):
            return [value for _ in values]
    raise Invalid("range and end begin an action")


def _descend(value: Any) -> Iterator[Any]:
    children = _children(value)
    if children:
        yield value
        for child in children:
            yield from _descend(child)


def _slice(step: Slice, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Invalid(f"{_go_type(value)} is not array or slice")
    length = len(value)
    start = step.start or 0
    if start < 0:
        start += length
    if step.single:
        end = start + 1
    else:
        end = length if step.end is None else step.end
        if end < 0:
            end += length
    if start == end:
        return []
    if not 0 <= start < length:
        raise Invalid(f"array index out of bounds: index {start}, length {length}")
    if not 0 <= end <= length:
        raise Invalid(f"array index out of bounds: index {end - 1}, length {length}")
    if start > end:
        raise Invalid(f"starting index {start} is greater than ending index {end}")
    if step.step is not None and step.step <= 0:
        raise Invalid("step must be > 0")
    return value[start : end : step.step or 1]


def _filter(step: Filter, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Invalid(f"{_go_type(value)} is not array or slice and cannot be filtered")
    kept = []
    for item in value:
        lefts = _evaluate(step.left, [item])
        if step.op == "exists":
            if lefts:
                kept.append(item)
            continue
        rights = _evaluate(step.right, [item])
        if not lefts or not rights:
            continue
        if len(lefts) > 1 or len(rights) > 1:
            raise Invalid("can only compare one element at a time")
        if _compare(lefts[0], step.op, rights[0]):
            kept.append(item)
    return kept


def _compare(left: Any, op: str, right: Any) -> bool:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
    if not numbers and type(left) is not type(right):
        raise Invalid(f"incompatible types for comparison: {left!r} {op} {right!r}")
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if not (numbers or isinstance(left, str)):
        raise Invalid(f"invalid type for comparison: {left!r} {op} {right!r}")
    return bool(
        {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]
    )


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "interface {}"


# -- printing -------------------------------------------------------------------------------


def text_of(value: Any) -> str:
    """One value as kubectl's JSONPath prints it (see the module docstring)."""
    if isinstance(value, dict | list):
        text = json.dumps(
            _go_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def go_value(value: Any) -> str:
    """`value` as Go's `%v` prints it (custom columns): `[a b]`, `map[k:v]` (keys sorted)."""
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    return text_of(value)


def _go_numbers(value: Any) -> Any:
    """`value` with each whole float as an int, as Go's encoder writes a float64 (`1`, not
    `1.0`)."""
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _go_float(value: float) -> str:
    """A float64 as Go's `%v` prints it (`strconv.FormatFloat(f, 'g', -1, 64)`): the
    shortest digits that read back the same, in exponent form below 1e-4 or from 1e6 on."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # where the decimal point goes among the digits
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        e = point - 1
        return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


class Template:
    """A parsed kubectl JSONPath template."""

    def __init__(self, text: str) -> None:
        self.nodes = _parse_template(text)

    def render(self, data: Any) -> str:
        """What kubectl prints for `data` (`Invalid` for an error of evaluation)."""
        return "".join(_render(self.nodes, data))

    def values(self, data: Any) -> list[Any]:
        """Every value the template's actions find in `data`, in order (custom columns)."""
        return [v for node in self.nodes for v in _values(node, data)]


def _render(nodes: Sequence[Node], data: Any) -> Iterator[str]:
    for node in nodes:
        match node:
            case Text(text):
                yield text
            case Action(path):
                yield " ".join(text_of(v) for v in _evaluate(path, [data]))
            case Range(path, body):
                for value in _evaluate(path, [data]):
                    yield from _render(body, value)


def _values(node: Node, data: Any) -> list[Any]:
    match node:
        case Text(text):
            return [text]
        case Action(path):
            return _evaluate(path, [data])
        case Range(path, body):
            return [v for item in _evaluate(path, [data]) for n in body for v in _values(n, item)]
    return []


# -- custom columns -------------------------------------------------------------------------

_RELAXED = re.compile(r"^\{?(\.?[^{}]*)\}?$")
_MIN_WIDTH = 6
_PADDING = 3


@dataclass(frozen=True, slots=True)
class Columns:
    """`-o custom-columns=HEADER:PATH,...`: each column's header and template."""

    headers: tuple[str, ...]
    templates: tuple[Template, ...]

    def row(self, obj: Any) -> list[str]:
        """One object's cells: a column's values joined with `,`, `<none>` when it has none."""
        cells = []
        for template in self.templates:
            texts = [go_value(v) for v in template.values(obj)]
            cells.append(",".join(texts) if texts else "<none>")
        return cells

    def table(self, objects: Sequence[Any]) -> list[str]:
        """The header and a row per object, aligned as kubectl's tab writer aligns them."""
        rows = [list(self.headers), *(self.row(obj) for obj in objects)]
        widths = [
            max(_MIN_WIDTH, max(len(r[i]) for r in rows) + _PADDING)
            for i in range(len(self.headers) - 1)
        ]
        return ["".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + r[-1] for r in rows]


def custom_columns(spec: str) -> Columns:
    """`HEADER:PATH,...` as kubectl reads it (a PATH with or without its braces and leading
    dot); `Invalid` naming what is wrong."""
    headers, templates = [], []
    for part in spec.split(","):
        header, colon, path = part.partition(":")
        if not colon:
            raise Invalid(
                f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
            )
        match = _RELAXED.fullmatch(path)
        if match is None:
            raise Invalid(f"unexpected path string, expected a 'name1.name2' or '.name1.name2' "
                          f"or '{{name1.name2}}' or '{{.name1.name2}}': {path}")  # fmt: skip
        inner = match.group(1)
        if not inner.startswith("."):
            inner = "." + inner
        headers.append(header)
        templates.append(Template("{" + inner + "}"))
    return Columns(tuple(headers), tuple(templates))
