"""Where an Autoscaler reads its metric: one number from an HTTP JSON endpoint, a
Prometheus text exposition endpoint, or a command's output.

* `HttpJsonSource(url, pointer)`: GET `url`, parse the body as JSON, take the value at
  the JSON pointer (RFC 6901, e.g. `/stats/inflight`).
* `PrometheusSource(url, name, labels)`: GET `url`, parse the text exposition format
  (`prometheus_client.parser`), and sum the samples called `name` whose labels include
  every pair of `labels` (so one gauge per handler adds up; no match is an error).
* `CommandSource(args, account)`: run `args` (no shell) as `account` (None: the engine's
  user), take its stdout, stripped, as a number. It starts as a workload's child does
  (`setpoint.runtime.run_as`): with the minimal environment a child gets (a few inherited
  variables, the engine's virtual environment activated, the account's HOME and USER),
  never the rest of the engine's environment. Which account is the caller's to decide (the
  Autoscaler controller: its target's `user:`, if this engine allows it).

`read_metric(source, within=...)` is async and gives up after `within` seconds
(the command is killed). Any failure raises `MetricUnavailable` with one line saying
what went wrong; its message never spans lines (the class is in `setpoint.errors`, the
one exception tree; it is re-exported here). The wire form (the Autoscaler's
`spec.metric`) is in `setpoint.control.autoscaler`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import pwd
import signal
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpointer
from prometheus_client.parser import text_string_to_metric_families

from setpoint.errors import MetricUnavailable
from setpoint.runtime.run_as import command_environment, switch_to

__all__ = [
    "DEFAULT_TIMEOUT",
    "CommandSource",
    "HttpJsonSource",
    "MetricSource",
    "MetricUnavailable",
    "PrometheusSource",
    "parse_number",
    "prometheus_value",
    "read_metric",
]

DEFAULT_TIMEOUT = 5.0
_MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpJsonSource:
    """A number at JSON `pointer` in the body of GET `url`."""

    url: str
    pointer: str = ""


@dataclass(frozen=True, slots=True)
class PrometheusSource:
    """The sum of the samples `name` with at least `labels`, from GET `url`."""

    url: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CommandSource:
    """The number a command prints, run as `account` (None: the engine's user)."""

    args: tuple[str, ...]
    account: pwd.struct_passwd | None = None


MetricSource = HttpJsonSource | PrometheusSource | CommandSource


async def read_metric(source: MetricSource, *, within: float = DEFAULT_TIMEOUT) -> float:
    """Read the metric of `source` within `within` seconds; raise `MetricUnavailable`
    (one line) on any failure."""
    if isinstance(source, CommandSource):
        return await _run_command(source, within)
    body = await _http_get(source.url, within)
    if isinstance(source, HttpJsonSource):
        return _json_value(body, source)
    return prometheus_value(body.decode("utf-8", errors="replace"), source.name, source.labels)


def parse_number(text: str, what: str) -> float:
    """`text` as a finite number, or `MetricUnavailable` naming `what`."""
    stripped = text.strip()
    try:
        value = float(stripped)
    except ValueError:
        shown = stripped if len(stripped) <= 60 else stripped[:57] + "..."
        raise MetricUnavailable(f"{what}: {shown!r} is not a number") from None
    if not math.isfinite(value):
        raise MetricUnavailable(f"{what}: {value} is not a finite number")
    return value


def prometheus_value(text: str, name: str, labels: Mapping[str, str]) -> float:
    """The sum of the samples `name` whose labels include `labels` in exposition `text`."""
    total = 0.0
    found = 0
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != name:
                    continue
                if all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += float(sample.value)
                    found += 1
    except ValueError as exc:
        raise MetricUnavailable(f"cannot parse the Prometheus exposition: {exc}") from None
    wanted = name + (
        "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else ""
    )
    if not found:
        raise MetricUnavailable(f"no sample {wanted} in the exposition")
    if not math.isfinite(total):
        raise MetricUnavailable(f"{wanted} is {total}, not a finite number")
    return total


def _json_value(body: bytes, source: HttpJsonSource) -> float:
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise MetricUnavailable(f"{source.url}: the body is not JSON ({exc})") from None
    try:
        value: Any = jsonpointer.resolve_pointer(document, source.pointer)
    except jsonpointer.JsonPointerException as exc:
        raise MetricUnavailable(f"{source.url}: pointer {source.pointer!r}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        kind = type(value).__name__
        raise MetricUnavailable(
            f"{source.url}: pointer {source.pointer!r} is a {kind}, not a number"
        )
    return parse_number(str(value), f"{source.url} at {source.pointer!r}")


async def _http_get(url: str, within: float) -> bytes:
    if not url.startswith(("http://", "https://")):
        raise MetricUnavailable(f"{url!r}: want an http:// or https:// URL")
    try:
        return await asyncio.wait_for(asyncio.to_thread(_fetch, url, within), within)
    except TimeoutError:
        raise MetricUnavailable(f"GET {url}: no answer within {within:g}s") from None


def _fetch(url: str, timeout: float) -> bytes:
    request = urllib.request.Request(
        url, headers={"User-Agent": "setpoint-autoscaler", "Accept": "*/*"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read(_MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        raise MetricUnavailable(f"GET {url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise MetricUnavailable(f"GET {url}: {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise MetricUnavailable(f"GET {url}: {exc}") from None
    if len(body) > _MAX_BODY:
        raise MetricUnavailable(f"GET {url}: the body is larger than {_MAX_BODY} bytes")
    return body


async def _run_command(source: CommandSource, within: float) -> float:
    shown = " ".join(source.args)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    try:
        proc = await asyncio.create_subprocess_exec(
            *source.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=command_environment(source.account),
            start_new_session=True,
            **switch_to(source.account),
        )
    except OSError as exc:
        raise MetricUnavailable(f"command {shown!r}: {exc.strerror or exc}") from None
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise MetricUnavailable(f"command {shown!r}: no answer within {within:g}s") from None
    if proc.returncode != 0:
        last = (stderr or stdout).decode(errors="replace").strip().splitlines()
        tail = f": {last[-1][:200]}" if last else ""
        raise MetricUnavailable(f"command {shown!r} exited with code {proc.returncode}{tail}")
    return parse_number(stdout.decode(errors="replace"), f"command {shown!r}")
