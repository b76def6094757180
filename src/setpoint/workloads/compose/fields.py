"""The field-level pieces of the process-compose translation, pure: the notes a
translation collects (`_Notes`), a value read as text, a mapping, a name, an environment,
exit codes, and a process's probes (`_probes`: exec, http_get, log-line readiness). No I/O
(`setpoint.workloads.compose.translate` puts them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from setpoint.errors import Invalid
from setpoint.model.meta import check_dns1123_subdomain
from setpoint.workloads.compose.template import render

_PROBE_FIELDS = frozenset(
    {
        "exec",
        "http_get",
        "initial_delay_seconds",
        "period_seconds",
        "timeout_seconds",
        "success_threshold",
        "failure_threshold",
    }
)


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})
"""Every character `str.splitlines` breaks at, written as its escape."""


def _one_line(text: str) -> str:
    return text.translate(_LINE_BREAKS)


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


@dataclass(slots=True)
class _Notes:
    """The warnings so far; under `strict`, an unknown field is refused instead."""

    strict: bool
    warnings: list[str] = field(default_factory=list)

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(_one_line(f"{where}: {message}"))

    def unknown(self, where: str) -> None:
        if self.strict:
            raise Invalid("unknown field (is_strict: true)", field=where)
        self.warn(where, "unknown field, ignored")


def _success_exit_codes(value: Any, where: str) -> list[int]:
    """`success_exit_codes`: a list of whole numbers (`Invalid` naming the field)."""
    if value in (None, []):
        return []
    if not isinstance(value, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) for c in value
    ):
        raise Invalid(f"{value!r}: want a list of exit codes", field=where)
    return sorted(set(value))


def _environment(value: Any, where: str, variables: Mapping[str, Any]) -> dict[str, str]:
    """`environment` as a mapping: a list of `NAME=VALUE` (process-compose's form) or a
    mapping; each entry rendered with `variables` (not the global one: `variables` empty)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items = [
            (str(k), "" if v is None else _scalar(v, f"{where}.{k}")) for k, v in value.items()
        ]
        return {k: render(v, variables, f"{where}.{k}") if variables else v for k, v in items}
    if not isinstance(value, list):
        raise Invalid("must be a list of NAME=VALUE or a mapping", field=where)
    out: dict[str, str] = {}
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise Invalid("must be a string NAME=VALUE", field=f"{where}[{i}]")
        text = render(item, variables, f"{where}[{i}]") if variables else item
        name, equals, val = text.partition("=")
        if not equals or not name:
            raise Invalid(f"{item!r}: want NAME=VALUE", field=f"{where}[{i}]")
        out[name] = val
    return out


def _rendered(value: Any, variables: Mapping[str, Any], where: str) -> str:
    """A string field of the file with its `{{.NAME}}` filled ("" when not set)."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise Invalid("must be a string", field=where)
    return render(value, variables, where)


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise Invalid("must be a string, number or boolean", field=where)


def _probes(
    config: Mapping[str, Any],
    where: str,
    notes: _Notes,
    spec: dict[str, Any],
    variables: Mapping[str, Any],
    shell: tuple[str, str],
) -> None:
    line = config.get("ready_log_line")
    if line:
        if config.get("readiness_probe"):
            raise Invalid(
                "ready_log_line and readiness_probe cannot both be set "
                "(process-compose refuses it too)",
                field=f"{where}.ready_log_line",
            )
        if not isinstance(line, str):
            raise Invalid("must be a string", field=f"{where}.ready_log_line")
        spec["readinessProbe"] = {"logLine": {"pattern": _literal_pattern(line)}}
    for key, wire in (("readiness_probe", "readinessProbe"), ("liveness_probe", "livenessProbe")):
        probe = config.get(key)
        if probe:
            spec[wire] = _probe(
                probe,
                f"{where}.{key}",
                config,
                notes,
                variables,
                shell,
                liveness=key == "liveness_probe",
            )


def _probe(
    value: Any,
    where: str,
    config: Mapping[str, Any],
    notes: _Notes,
    variables: Mapping[str, Any],
    shell: tuple[str, str],
    *,
    liveness: bool,
) -> dict[str, Any]:
    probe = _mapping(value, where)
    for key in probe:
        if key not in _PROBE_FIELDS:
            notes.unknown(f"{where}.{key}")
    out: dict[str, Any] = {}
    defaults = {
        "initial_delay_seconds": (0, 0),
        "period_seconds": (1, 10),
        "timeout_seconds": (1, 1),
        "success_threshold": (1, 1),
        "failure_threshold": (1, 3),
    }
    for key, (least, default) in defaults.items():
        number = probe.get(key) or 0
        if not isinstance(number, int) or isinstance(number, bool):
            raise Invalid(f"{number!r}: want a whole number", field=f"{where}.{key}")
        number = number if number >= least else default  # process-compose's defaults
        if number != default:  # its defaults are Kubernetes', setpoint's
            out[_camel(key)] = number
    if liveness and out.get("successThreshold", 1) != 1:
        notes.warn(
            f"{where}.success_threshold", "1 for a liveness probe in setpoint (as in Kubernetes)"
        )
        del out["successThreshold"]
    exec_, http = probe.get("exec"), probe.get("http_get")
    if bool(exec_) == bool(http):
        raise Invalid("want exactly one of exec and http_get", field=where)
    if exec_:
        action = _mapping(exec_, f"{where}.exec")
        for key in action:
            if key not in ("command", "working_dir"):
                notes.unknown(f"{where}.exec.{key}")
        command = _rendered(action.get("command"), variables, f"{where}.exec.command")
        if not command:
            raise Invalid("required: a command", field=f"{where}.exec.command")
        probe_dir = action.get("working_dir")
        if probe_dir and probe_dir != config.get("working_dir"):
            notes.warn(
                f"{where}.exec.working_dir",
                "ignored: an exec probe runs in the process's working_dir",
            )
        out["exec"] = {"command": [*shell, command]}
    else:
        out["httpGet"] = _http_get(
            _mapping(http, f"{where}.http_get"), f"{where}.http_get", notes, variables
        )
    return out


def _http_get(
    action: Mapping[str, Any], where: str, notes: _Notes, variables: Mapping[str, Any]
) -> dict[str, Any]:
    for key in action:
        if key not in ("host", "path", "scheme", "port", "headers", "status_code"):
            notes.unknown(f"{where}.{key}")

    def text(key: str) -> str:
        value = action.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a port written as a number
        return _rendered(value, variables, f"{where}.{key}")

    port_text = text("port").strip()
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise Invalid(f"{action.get('port')!r}: want a port, 1-65535", field=f"{where}.port")
    out: dict[str, Any] = {"port": int(port_text)}
    out["host"] = text("host").strip() or "127.0.0.1"
    out["path"] = text("path").strip() or "/"
    scheme = (text("scheme").strip() or "http").upper()
    if scheme not in ("HTTP", "HTTPS"):
        raise Invalid(f"{scheme.lower()!r}: want http or https", field=f"{where}.scheme")
    out["scheme"] = scheme
    headers = _mapping(action.get("headers"), f"{where}.headers")
    if headers:
        out["httpHeaders"] = [
            {"name": str(k), "value": _scalar(v, f"{where}.headers.{k}")}
            for k, v in headers.items()
        ]
    code = action.get("status_code")
    if code and code != 200:
        notes.warn(f"{where}.status_code", "ignored: setpoint counts any status 200-399 as success")
    return out


def _setpoint_name(name: str) -> str:
    """The name a process of the file gets in setpoint, whose names are lower case and
    have no `_`: `test_env` is `test-env`, `procA` is `proca`."""
    return name.lower().replace("_", "-")


def _name(name: str, where: str) -> str:
    try:
        return check_dns1123_subdomain(name, where)
    except Invalid as exc:
        raise Invalid(f"{exc}: rename the process") from None


def _literal_pattern(text: str) -> str:
    """An RE2 pattern that matches `text` anywhere in a line (process-compose's
    `ready_log_line` is a plain substring)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


def _camel(key: str) -> str:
    first, *rest = key.split("_")
    return first + "".join(part.title() for part in rest)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping, not {type(value).__name__}", field=where)
    return value
