"""The public test kit: fakes that make setpoint code deterministic under test.

`ManualClock` stands in for the system clock wherever code takes a `Clock`;
time moves only when the test advances it. `Harness` gives a test an in-memory
store and a manager to register its controllers on; `reconcile_until_stable`
waits until those controllers have nothing left to do; `capture_events`
collects the `Event`s recorded meanwhile. Nothing here is used by setpoint
itself outside tests.
"""

from setpoint.testing.clock import ManualClock
from setpoint.testing.harness import (
    CapturedEvent,
    EventCapture,
    Harness,
    capture_events,
    reconcile_until_stable,
)

__all__ = [
    "CapturedEvent",
    "EventCapture",
    "Harness",
    "ManualClock",
    "capture_events",
    "reconcile_until_stable",
]
