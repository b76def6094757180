"""The engine: what `setpoint up` runs, as a library the CLI and the API server both call.

`builtin_kinds()` is a registry of every built-in kind; `Engine` runs every built-in
controller and the timeline recorder in one manager on one store, after claiming the
store's engine lease, so that only one engine ever runs on a store (`EngineRunning`
otherwise). It prints nothing, handles no signals and reads no manifests.
"""

from setpoint.engine.claim import ENGINE_LEASE, EngineHolder, claim_engine_lease
from setpoint.engine.engine import Engine, EngineSettings, Workspace, workspace_of
from setpoint.engine.kinds import builtin_kinds

__all__ = [
    "ENGINE_LEASE",
    "Engine",
    "EngineHolder",
    "EngineSettings",
    "Workspace",
    "builtin_kinds",
    "claim_engine_lease",
    "workspace_of",
]
