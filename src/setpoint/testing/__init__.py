"""The public test kit: fakes that make setpoint code deterministic under test.

`ManualClock` stands in for the system clock wherever code takes a `Clock`;
time moves only when the test advances it. Nothing here is used by setpoint
itself outside tests.
"""

from setpoint.testing.clock import ManualClock

__all__ = ["ManualClock"]
