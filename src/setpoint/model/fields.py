"""Constrained field types for kind schemas: values a process (or the OS) can actually use.

Use them in `Schema` annotations so a bad value is refused at admission, naming the
field, instead of failing later at start::

    class MySpec(Schema):
        args: list[OsString]
        env: dict[EnvName, OsString]

Pure: no I/O.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from setpoint.model.quantities import parse_bytes


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise PydanticCustomError(
            "nul_byte", "contains a NUL byte, which no command line, path or environment can hold"
        )
    return value


def _env_name(value: str) -> str:
    if not value:
        raise PydanticCustomError("env_name", "an environment variable name cannot be empty")
    if "=" in value:
        raise PydanticCustomError(
            "env_name", "'{name}': an environment variable name cannot contain '='", {"name": value}
        )
    return _no_nul(value)


def _byte_quantity(value: object) -> object:
    if isinstance(value, int | str):
        try:
            parse_bytes(value)
        except ValueError as exc:
            raise PydanticCustomError("quantity", "{msg}", {"msg": str(exc)}) from None
        return str(value)
    return value  # not a quantity at all: the str type says so


OsString = Annotated[str, AfterValidator(_no_nul)]
"""A string the OS can take as an argument, a path or an environment value: no NUL byte."""

EnvName = Annotated[str, AfterValidator(_env_name)]
"""An environment variable name: not empty, no `=`, no NUL byte."""

ByteQuantity = Annotated[str, BeforeValidator(_byte_quantity)]
"""An amount of bytes as Kubernetes writes it (`64Mi`, `1Gi`, `500M`, `134217728`), kept as
written (an int as its digits); `setpoint.model.quantities.parse_bytes` reads it."""
