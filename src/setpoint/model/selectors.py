"""Label selectors, Kubernetes syntax: parsed once, matched many times. Pure.

    a=b  a==b  a!=b  a in (x,y)  a notin (x)  a  !a      (comma = and)

`parse_selector("tier in (web,api),!canary")` returns a `Selector`;
`selector.matches(labels)` answers. A syntax error raises `Invalid` naming the
position. `Selector.from_dict` reads the structured form (`matchLabels`,
`matchExpressions`) used inside specs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from setpoint.errors import Invalid
from setpoint.model.meta import check_label_value, check_qualified_name

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        match self.operator:
            case "exists":
                return has
            case "!":
                return not has
            case "=" | "in":
                return has and labels[self.key] in self.values
            case _:  # "!=", "notin": true when the key is absent too
                return not has or labels[self.key] not in self.values

    def __str__(self) -> str:
        vals = sorted(self.values)
        match self.operator:
            case "exists":
                return self.key
            case "!":
                return f"!{self.key}"
            case "=" | "!=":
                return f"{self.key}{self.operator}{vals[0]}"
            case _:
                return f"{self.key} {self.operator} ({','.join(vals)})"


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    @classmethod
    def of(cls, selector: str | Selector | None) -> Selector:
        """A selector given in either form (the string form is parsed)."""
        return selector if isinstance(selector, Selector) else parse_selector(selector)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Selector:
        """`{matchLabels: {...}, matchExpressions: [{key, operator, values}]}`; anything
        else (a value of the wrong type included) is `Invalid`, naming the field."""
        if not isinstance(spec, Mapping):
            raise Invalid("want an object with matchLabels and matchExpressions", field="selector")
        labels = spec.get("matchLabels") or {}
        if not isinstance(labels, Mapping):
            raise Invalid("want a map of label keys to values", field="matchLabels")
        reqs = [_requirement(k, "=", [v]) for k, v in sorted(labels.items(), key=_by_key)]
        ops: dict[str, Operator] = {
            "In": "in",
            "NotIn": "notin",
            "Exists": "exists",
            "DoesNotExist": "!",
        }
        expressions = spec.get("matchExpressions") or []
        if not isinstance(expressions, list):
            raise Invalid("want a list of {key, operator, values}", field="matchExpressions")
        for i, expr in enumerate(expressions):
            field = f"matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                raise Invalid("want an object with key, operator and values", field=field)
            operator = expr.get("operator", "")
            op = ops.get(operator) if isinstance(operator, str) else None
            if op is None:
                raise Invalid(
                    f"{operator!r}: want one of {', '.join(ops)}", field=f"{field}.operator"
                )
            values = expr.get("values") or []
            if not isinstance(values, list):
                raise Invalid("want a list of label values", field=f"{field}.values")
            reqs.append(_requirement(expr.get("key", ""), op, values))
        return cls(tuple(reqs))


def _by_key(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _requirement(key: Any, op: Operator, values: list[Any]) -> Requirement:
    check_qualified_name(key, "labelSelector")
    for v in values:
        check_label_value(v, "labelSelector")
    if op in ("=", "!=") and len(values) != 1:
        raise Invalid(f"{key}{op}: exactly one value", field="labelSelector")
    if op in ("in", "notin") and not values:
        raise Invalid(f"{key} {op}: at least one value", field="labelSelector")
    if op in ("exists", "!") and values:
        raise Invalid(f"{key}: takes no values", field="labelSelector")
    return Requirement(key, op, frozenset(values))


def parse_selector(text: str | None) -> Selector:
    """Parse the string form; `None` or `""` selects everything."""
    if not text or not text.strip():
        return Selector()
    tokens: list[tuple[int, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            break
        if m.group(1):
            tokens.append((m.start(1), m.group(1)))
        pos = m.end()
    if text[pos:].strip():
        raise _syntax(text, pos, "unexpected character")

    reqs: list[Requirement] = []
    i = 0

    def take() -> tuple[int, str]:
        nonlocal i
        if i >= len(tokens):
            raise _syntax(text, len(text), "unexpected end")
        i += 1
        return tokens[i - 1]

    def peek() -> str | None:
        return tokens[i][1] if i < len(tokens) else None

    while True:
        at, tok = take()
        if tok == "!":
            _, key = take()
            reqs.append(_requirement(key, "!", []))
        elif tok in ("=", "==", "!=", "(", ")", ","):
            raise _syntax(text, at, f"expected a label key, found {tok!r}")
        else:
            key = tok
            nxt = peek()
            if nxt in ("=", "==", "!="):
                take()
                vat, val = (i, "") if peek() in (",", None) else take()
                if val in ("(", ")", "!", "=", "==", "!="):
                    raise _syntax(text, vat, f"expected a value, found {val!r}")
                reqs.append(_requirement(key, "!=" if nxt == "!=" else "=", [val]))
            elif nxt in ("in", "notin"):
                take()
                pat, paren = take()
                if paren != "(":
                    raise _syntax(text, pat, "expected '('")
                values: list[str] = []
                want_value = True  # an empty element is the empty value: `a in (,x)`
                while True:
                    vat, val = take()
                    if val in (")", ","):
                        if want_value:
                            values.append("")
                        if val == ")":
                            break
                        want_value = True
                    elif not want_value:
                        raise _syntax(text, vat, "expected ',' or ')'")
                    elif val in ("(", "!", "=", "==", "!="):
                        raise _syntax(text, vat, f"expected a value, found {val!r}")
                    else:
                        values.append(val)
                        want_value = False
                reqs.append(_requirement(key, "in" if nxt == "in" else "notin", values))
            else:
                reqs.append(_requirement(key, "exists", []))
        if peek() is None:
            return Selector(tuple(reqs))
        at, sep = take()
        if sep != ",":
            raise _syntax(text, at, f"expected ',', found {sep!r}")


def _syntax(text: str, at: int, what: str) -> Invalid:
    return Invalid(f"{what} at position {at} in {text!r}", field="labelSelector")
