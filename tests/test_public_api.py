"""The public API is pinned: changing what `setpoint` and its documented subpackages export
is a decision, made here on purpose. (ruff's RUF022 keeps each `__all__` sorted.)"""

import setpoint
import setpoint.control
import setpoint.engine
import setpoint.model
import setpoint.runtime
import setpoint.store
import setpoint.testing
import setpoint.workloads

PINNED = {
    setpoint: {
        "SYSTEM_CLOCK", "APIError", "AlreadyExists", "Clock", "Conflict", "DomainError",
        "Error", "Gone", "Invalid", "Kind", "LeadershipLost", "Manager", "ManagerOptions",
        "NotFound", "Object", "Reconciler", "Registry", "Request", "Result", "Schema",
        "Selector", "Store", "StoreClosed", "TerminalError", "TransportError", "Typed",
        "UnknownKind", "__version__", "get_condition", "is_true", "open_store",
        "parse_selector", "set_condition",
    },
    setpoint.store: {
        "FOREGROUND_DELETION", "ORPHAN", "Actor", "AlreadyExists", "Conflict", "EventType",
        "Gone", "Invalid", "NotFound", "Store", "StoreClosed", "UnknownKind", "WatchEvent",
        "WriteOptions", "open_store", "read_kinds",
    },
    setpoint.model: {
        "READY", "RECONCILING", "STALLED", "Kind", "Object", "PrinterColumn",
        "Registry", "ScaleSubresource", "Requirement", "Schema", "Selector", "apply_patch",
        "codec", "get_condition", "is_true",
        "merge_patch", "object_key", "parse_selector", "remove_condition",
        "set_condition", "set_ready_summary",
    },
    setpoint.runtime: {
        "EVENT", "KINDS", "LEASE", "NORMAL", "WARNING", "BucketLimiter", "Cache", "Controller",
        "ControllerBuilder", "ControllerObserver", "ControllerSettings", "Coordination",
        "EventRecorder", "GarbageCollector", "HashRing", "Informer", "InformerEvent",
        "ItemExponentialLimiter", "LeaderElector", "LeaseSettings", "Manager", "ManagerOptions",
        "MaxOfLimiter", "Metrics", "Predicate", "QueueStatistics", "RateLimiter", "Reconciler",
        "Request", "Result", "ShardMember", "ShutDown", "Typed", "WorkQueue", "add_finalizer",
        "and_",
        "annotations_changed", "controller_of", "generation_changed", "has_finalizer",
        "is_deleting", "labels_changed", "not_", "or_", "owner_reference", "register",
        "remove_finalizer", "set_controller_reference",
    },
    setpoint.workloads: {"KINDS", "register"},
    setpoint.control: {"KINDS", "register"},
    setpoint.engine: {
        "ENGINE_LEASE", "Engine", "EngineHolder", "EngineSettings", "Workspace",
        "builtin_kinds", "claim_engine_lease", "workspace_of",
    },
}  # fmt: skip


def test_exports_are_pinned() -> None:
    for module, names in PINNED.items():
        assert set(module.__all__) == names, module.__name__


def test_every_exported_name_exists() -> None:
    for module in (*PINNED, setpoint.testing):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
