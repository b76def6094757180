"""The public test kit: fakes that make setpoint code deterministic under test.

`ManualClock` stands in for the system clock wherever code takes a `Clock`;
time moves only when the test advances it. `Harness` gives a test an in-memory
store and a manager to register its controllers on; `reconcile_until_stable`
waits until those controllers have nothing left to do; `capture_events`
collects the `Event`s recorded meanwhile; `wait_for` waits for a stored object to
reach a state, and `free_port_range` finds ports for test servers. `ApiServer` is a real API
server on a temporary store, with a kubeconfig that Kubernetes clients and operators (kopf,
kr8s, lightkube) load as it is; its pytest fixture `setpoint_api` is in
`setpoint.testing.fixtures` (imported by a conftest, not here: it needs pytest). Nothing here
is used by setpoint itself outside tests.
"""

from setpoint.testing.api_server import ApiServer
from setpoint.testing.clock import ManualClock
from setpoint.testing.harness import (
    CapturedEvent,
    EventCapture,
    Harness,
    capture_events,
    reconcile_until_stable,
)
from setpoint.testing.waiting import free_port_range, wait_for

__all__ = [
    "ApiServer",
    "CapturedEvent",
    "EventCapture",
    "Harness",
    "ManualClock",
    "capture_events",
    "free_port_range",
    "reconcile_until_stable",
    "wait_for",
]
