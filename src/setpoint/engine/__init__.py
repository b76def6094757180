"""The engine: what `setpoint up` runs, as a library the CLI and the API server both call.

`builtin_kinds()` is a registry of every built-in kind; `Engine` runs every built-in
controller and the timeline recorder in one manager on one store, after claiming the
store's engine lease, so that only one engine ever runs on a store (`EngineRunning`
otherwise). It prints nothing, handles no signals and reads no manifests. Names are
imported on first use (`setpoint.lazy`), so `builtin_kinds` costs no controller import.
"""

from setpoint import lazy

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

if TYPE_CHECKING:
    from setpoint.engine.claim import ENGINE_LEASE, EngineHolder, claim_engine_lease
    from setpoint.engine.engine import Engine, EngineSettings, Workspace, workspace_of
    from setpoint.engine.kinds import builtin_kinds

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.engine.claim": ("ENGINE_LEASE", "EngineHolder", "claim_engine_lease"),
        "setpoint.engine.engine": ("Engine", "EngineSettings", "Workspace", "workspace_of"),
        "setpoint.engine.kinds": ("builtin_kinds",),
    },
)

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
