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

OUTSIDE_THE_TREE = {"Empty", "ShutDown", "_BadRequest", "_DuplicateKey", "_NotJson"}


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


def test_metric_unavailable_is_one_line_and_an_error() -> None:
    from setpoint.control.metrics_source import MetricUnavailable

    assert MetricUnavailable is errors.MetricUnavailable
    assert str(MetricUnavailable("no\nanswer   here")) == "no answer here"
    assert MetricUnavailable.reason == "FailedGetMetric"
