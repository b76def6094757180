"""Every exception class setpoint defines is in the one documented tree (`setpoint.errors`):
it derives from `setpoint.Error` and the tree in that module's docstring names it, or the
docstring names it as one of the few kept out on purpose."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import setpoint
from setpoint import errors

OUTSIDE_THE_TREE = {"Empty", "ShutDown", "_DuplicateKey", "_NotJson"}


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(setpoint.__path__, "setpoint."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_is_in_the_documented_tree() -> None:
    doc = errors.__doc__ or ""
    tree = set(re.findall(r"[├└]── (\w+)", doc)) | {"Error"}
    for where, cls in _exception_classes().items():
        if cls.__name__ in OUTSIDE_THE_TREE:
            assert f"`{cls.__name__}`" in doc, f"{where}: say in setpoint.errors why it is apart"
            continue
        assert issubclass(cls, errors.Error), f"{where} does not derive from setpoint.Error"
        assert cls.__name__ in tree, f"{where} is missing from the tree in setpoint.errors"
        assert cls.__module__ == "setpoint.errors", f"{where}: define it in setpoint.errors"


def _drawn_parents(doc: str) -> dict[str, str]:
    """Each class in the docstring's drawing, with the class it hangs from."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = [(-1, "Error")]
    for line in doc.splitlines():
        match = re.match(r"^(\s*)((?:│\s*)*)[├└]── (\w+)", line)
        if match is None:
            continue
        depth = line.index(match.group(3))
        while stack[-1][0] >= depth:
            stack.pop()
        parents[match.group(3)] = stack[-1][1]
        stack.append((depth, match.group(3)))
    return parents


def test_every_class_derives_from_the_class_it_is_drawn_under() -> None:
    parents = _drawn_parents(errors.__doc__ or "")
    assert len(parents) == len(set(parents)) >= 25
    for name, parent in parents.items():
        cls = getattr(errors, name)
        assert cls.__bases__ == (getattr(errors, parent),), f"{name} is drawn under {parent}"


def test_three_families_under_error() -> None:
    """Transport (retry), API (a refusal with a status), domain (a loop cannot go on)."""
    families = {
        cls.__name__: sorted(sub.__name__ for sub in _subclasses(cls))
        for cls in errors.Error.__subclasses__()
    }
    assert families == {
        "TransportError": [
            "MetricUnavailable", "StoreClosed", "StoreUnavailable", "WebhookFailed",
        ],
        "APIError": [
            "AlreadyExists", "BadRequest", "CheckpointMoved", "Conflict", "Forbidden", "Gone",
            "Invalid", "NotFound", "RequestEntityTooLarge", "SecretUnavailable", "Unauthorized",
            "UnknownKind", "UnsupportedMediaType", "UserRefused",
        ],
        "DomainError": ["EngineRunning", "EnvFileUnavailable", "LeadershipLost", "TerminalError"],
    }  # fmt: skip
    assert setpoint.TransportError is errors.TransportError
    assert setpoint.APIError is errors.APIError
    assert setpoint.DomainError is errors.DomainError


def test_a_refusal_keeps_its_status_under_its_family() -> None:
    assert (errors.NotFound.code, errors.Conflict.code, errors.Invalid.code) == (404, 409, 422)
    assert (errors.Forbidden.code, errors.Gone.reason) == (403, "Expired")
    assert errors.StoreUnavailable.code == errors.StoreClosed.code == 503


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for sub in cls.__subclasses__():
        if sub.__module__ == "setpoint.errors":
            found += [sub, *_subclasses(sub)]
    return found


def test_metric_unavailable_is_one_line_and_an_error() -> None:
    from setpoint.control.metrics_source import MetricUnavailable

    assert MetricUnavailable is errors.MetricUnavailable
    assert str(MetricUnavailable("no\nanswer   here")) == "no answer here"
    assert MetricUnavailable.reason == "FailedGetMetric"
