"""The public API is pinned: changing what `setpoint` and its documented subpackages export
is a decision, made here on purpose."""

import setpoint
import setpoint.model
import setpoint.store


def test_top_level_exports() -> None:
    assert setpoint.__all__ == sorted(setpoint.__all__)
    assert set(setpoint.__all__) == {
        "AlreadyExists", "Conflict", "Error", "Gone", "Invalid", "Kind", "NotFound",
        "Schema", "Selector", "StoreClosed", "TerminalError", "UnknownKind", "__version__",
        "parse_selector", "register_kind",
    }  # fmt: skip


def test_store_exports() -> None:
    assert setpoint.store.__all__ == sorted(setpoint.store.__all__)
    assert set(setpoint.store.__all__) == {
        "AlreadyExists", "Conflict", "EventType", "Gone", "Invalid", "NotFound", "Store",
        "WatchEvent", "open_store",
    }  # fmt: skip


def test_model_exports() -> None:
    assert set(setpoint.model.__all__) == {
        "READY", "RECONCILING", "REGISTRY", "STALLED", "Kind", "Object", "Registry",
        "Requirement", "Schema", "Selector", "apply_patch", "get_condition", "is_true",
        "merge_patch", "object_key", "parse_selector", "register_kind", "remove_condition",
        "set_condition",
    }  # fmt: skip


def test_every_exported_name_exists() -> None:
    for module in (setpoint, setpoint.model, setpoint.store):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
