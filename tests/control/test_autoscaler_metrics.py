"""The Autoscaler's metric sources, against a real child HTTP server and real commands:
what they read, and the one-line error each failure gives."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from control_autoscaler_support import metrics_server

from setpoint.control.metrics_source import (
    CommandSource,
    HttpJsonSource,
    MetricUnavailable,
    PrometheusSource,
    prometheus_value,
    read_metric,
)

EXPOSITION = """\
# HELP http_in_flight Requests in flight.
# TYPE http_in_flight gauge
http_in_flight{handler="/",method="GET"} 3
http_in_flight{handler="/",method="POST"} 2
http_in_flight{handler="/admin",method="GET"} 7
# TYPE http_requests counter
http_requests_total{handler="/"} 1027
"""


def test_prometheus_sums_the_samples_that_match_the_labels() -> None:
    assert prometheus_value(EXPOSITION, "http_in_flight", {"handler": "/"}) == 5.0
    assert prometheus_value(EXPOSITION, "http_in_flight", {}) == 12.0
    assert prometheus_value(EXPOSITION, "http_in_flight", {"method": "GET"}) == 10.0
    assert prometheus_value(EXPOSITION, "http_requests_total", {}) == 1027.0


def test_prometheus_without_a_match_names_what_it_looked_for() -> None:
    with pytest.raises(MetricUnavailable, match=r'no sample http_in_flight\{handler="/x"\}'):
        prometheus_value(EXPOSITION, "http_in_flight", {"handler": "/x"})
    with pytest.raises(MetricUnavailable, match="cannot parse"):
        prometheus_value("not { an exposition\n", "x", {})


async def test_reads_json_and_prometheus_from_a_real_server(tmp_path: Path) -> None:
    async with metrics_server(tmp_path, 12.5) as server:
        assert await read_metric(HttpJsonSource(server.url("/stats"), "/app/inflight")) == 12.5
        prometheus = PrometheusSource(
            server.url("/metrics"), "app_requests_in_flight", {"handler": "/"}
        )
        assert await read_metric(prometheus) == 12.5
        server.set(4)
        assert await read_metric(prometheus) == 4.0

        with pytest.raises(MetricUnavailable, match="HTTP 404"):
            await read_metric(HttpJsonSource(server.url("/nothing"), "/x"))
        with pytest.raises(MetricUnavailable, match="pointer '/app/missing'"):
            await read_metric(HttpJsonSource(server.url("/stats"), "/app/missing"))
        with pytest.raises(MetricUnavailable, match="is a dict, not a number"):
            await read_metric(HttpJsonSource(server.url("/stats"), "/app"))
        with pytest.raises(MetricUnavailable, match="not JSON"):
            await read_metric(HttpJsonSource(server.url("/metrics"), ""))


async def test_a_refused_connection_is_one_line() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(MetricUnavailable) as caught:
        await read_metric(HttpJsonSource(f"http://127.0.0.1:{port}/stats", "/x"))
    assert "refused" in str(caught.value).lower()
    assert "\n" not in str(caught.value)


async def test_commands() -> None:
    assert await read_metric(CommandSource((sys.executable, "-c", "print(' 7.25 ')"))) == 7.25
    with pytest.raises(MetricUnavailable, match=r"exited with code 3: boom"):
        await read_metric(
            CommandSource(
                (sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)")
            )
        )
    with pytest.raises(MetricUnavailable, match=r"no answer within 0\.3s"):
        await read_metric(
            CommandSource((sys.executable, "-c", "import time; time.sleep(30)")), within=0.3
        )
    with pytest.raises(MetricUnavailable, match="No such file"):
        await read_metric(CommandSource(("/nonexistent/metric-tool",)))
    with pytest.raises(MetricUnavailable, match="not a finite number"):
        await read_metric(CommandSource((sys.executable, "-c", "print('nan')")))
