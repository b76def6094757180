"""Patches on wire-form objects: RFC 7386 JSON merge patch and RFC 6902 JSON patch. Pure.

`apply_patch(obj, patch, patch_type)` returns a new object and never changes
its argument; a malformed patch raises `Invalid` saying why. `merge_diff(old, new)` is the
merge patch from one value to another.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from setpoint.errors import Invalid

PatchType = Literal["merge", "json"]

PATCH_CONTENT_TYPES: dict[str, PatchType] = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merge_diff(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch that turns `old` into `new` (`{}` when they are equal): what
    changed, key by key, a removed key as `null`; a list or value that changed, whole."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return copy.deepcopy(new)
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
        elif old[key] != value:
            inner = merge_diff(old[key], value)
            patch[key] = inner
    return patch


def apply_patch(obj: dict[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise Invalid("a merge patch must be a JSON object", field="patch")
        result = merge_patch(obj, patch)
        assert isinstance(result, dict)
        return result
    if patch_type == "json":
        if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
            raise Invalid("a JSON patch must be a list of operations", field="patch")
        import jsonpatch  # here, not at the top: only JSON patches pay for it
        import jsonpointer

        try:
            result = jsonpatch.JsonPatch(patch).apply(obj, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise Invalid(str(exc), field="patch") from None
        except (TypeError, KeyError, ValueError) as exc:
            raise Invalid(f"malformed operation: {exc}", field="patch") from None
        if not isinstance(result, dict):
            raise Invalid("the patch must leave an object", field="patch")
        return result
    raise Invalid(f"{patch_type!r}: want 'merge' or 'json'", field="patch_type")
