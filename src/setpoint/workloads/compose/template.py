"""process-compose's `vars`: Go-template `{{.NAME}}` substitution in a process's strings.

`render(text, variables, field)` replaces each `{{.NAME}}` (spaces allowed inside the
braces) by the value of `NAME` in `variables`, written as Go's `fmt` writes it (`8080`,
`true`, `1.5`). Only that form is supported: any other action (`{{if}}`, pipelines,
functions, `{{- trim -}}`), an unclosed `{{`, a name with no value, or a value that is a
list or a mapping is refused with `Invalid` naming `field` (process-compose would print
`<no value>` for a missing name; setpoint refuses rather than run a command with it).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from setpoint.errors import Invalid

__all__ = ["render"]

_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*")


def render(text: str, variables: Mapping[str, Any], field: str) -> str:
    """`text` with every `{{.NAME}}` replaced (see the module docstring)."""
    if "{{" not in text:
        return text

    def value_of(match: re.Match[str]) -> str:
        action = match.group(1)
        name = _NAME.fullmatch(action)
        if name is None:
            raise Invalid(
                f"{match.group(0)}: only {{{{.NAME}}}} of vars is supported in a template",
                field=field,
            )
        key = name.group(1)
        if key not in variables:
            known = ", ".join(sorted(variables)) or "none"
            raise Invalid(f"{match.group(0)}: no such var (vars: {known})", field=field)
        return _go_format(variables[key], match.group(0), field)

    out = _ACTION.sub(value_of, text)
    if "{{" in _ACTION.sub("", text):
        raise Invalid("an unclosed {{ in a template", field=field)
    return out


def _go_format(value: Any, action: str, field: str) -> str:
    """`value` as Go's `%v` writes a YAML scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    raise Invalid(
        f"{action}: a var used in a template must be a string, number or boolean", field=field
    )
