"""Kinds as data in the store (`setpoint.store.kinds`): a CRD written through any process
defines its kind in every process that shares the store, objects of it are validated by
its schema (a refused one writes nothing), and built-in kinds publish their CRDs once.

Two `open_store`s of one SQLite file are two processes' views (each its own registry);
the CLI test runs the real `python -m setpoint` with no `--kinds`.
"""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from crd_kit import widget, widget_crd

from setpoint.engine import builtin_kinds
from setpoint.errors import Invalid, UnknownKind
from setpoint.model import Registry
from setpoint.model.crd import CRD, SchemaValidator, crd_of
from setpoint.store import open_store
from setpoint.store.kinds import publish_kinds


async def test_a_crd_defines_its_kind_in_every_process_sharing_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = await open_store(url, Registry())
    early = await open_store(url, Registry())  # opened before the CRD exists
    try:
        await first.create(widget_crd())
        assert first.registry.resolve("widgets").kind == "Widget"  # this process: at once
        created = await first.create(widget({"size": 2}))
        assert created["spec"] == {"size": 2, "colour": "red"}  # the schema's default

        revision = await first.revision()
        with pytest.raises(Invalid) as caught:
            await first.create({**widget({"size": 2, "szie": 3}), "metadata": {"name": "bad"}})
        assert caught.value.field == "spec.szie"
        with pytest.raises(Invalid) as caught:
            await first.create({**widget({"size": "big"}), "metadata": {"name": "bad"}})
        assert caught.value.field == "spec.size"
        assert await first.revision() == revision  # nothing written

        # Another process that was open already: a miss rereads the CRDs once.
        two = {**widget({"size": 5}), "metadata": {"name": "two"}}
        assert (await early.create(two))["spec"]["colour"] == "red"
        with pytest.raises(Invalid) as caught:
            await early.create({**widget({"size": 0}), "metadata": {"name": "bad"}})
        assert caught.value.field == "spec.size"

        # A process opened later knows it from the start.
        late = await open_store(url, Registry())
        try:
            items, _ = await late.list("example.com/v1", "Widget")
            assert sorted(o["metadata"]["name"] for o in items) == ["two", "w"]

            # A changed CRD changes the kind everywhere: `size` may now be 0.
            stored = await first.get(CRD.api_version, CRD.kind, "widgets.example.com", None)
            changed = copy.deepcopy(stored)
            size = changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
                "spec"
            ]["properties"]["size"]
            size["minimum"] = 0
            await first.update(changed)
            await until(lambda: 'minimum": 0' in _schema_text(late.registry))
            await late.create({**widget({"size": 0}), "metadata": {"name": "zero"}})

            # A deleted CRD is forgotten by the processes that see it go.
            await first.delete(CRD.api_version, CRD.kind, "widgets.example.com", None)
            with pytest.raises(UnknownKind):
                first.registry.get("example.com/v1", "Widget")
            await until(lambda: late.registry.defined() == [])
            with pytest.raises(UnknownKind):
                late.registry.resolve("widgets")
        finally:
            await late.close()
    finally:
        await early.close()
        await first.close()


async def test_a_python_kind_wins_over_its_crd(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'state.db'}", builtin_kinds())
    try:
        process = store.registry.resolve("processes")
        await publish_kinds(store, store.registry)
        assert store.registry.resolve("processes") is process
        assert store.registry.defined() == []
    finally:
        await store.close()


async def test_publishing_the_builtin_crds_writes_only_what_changed() -> None:
    store = await open_store("memory://", builtin_kinds())
    try:
        grouped = [k for k in store.registry if k.group and k.validator is None]
        assert await publish_kinds(store, store.registry) == len(grouped)
        revision = await store.revision()
        assert await publish_kinds(store, store.registry) == 0
        assert await store.revision() == revision  # nothing written the second time
        crds, _ = await store.list(CRD.api_version, CRD.kind)
        assert sorted(c["metadata"]["name"] for c in crds) == sorted(
            f"{k.plural}.{k.group}" for k in grouped
        )
        # A stale CRD (an older version's) is brought up to date, once.
        process = store.registry.resolve("processes")
        stale = await store.get(CRD.api_version, CRD.kind, "processes.setpoint.dev", None)
        stale["spec"]["names"]["shortNames"] = ["old"]
        await store.update(stale)
        assert await publish_kinds(store, store.registry) == 1
        fresh = await store.get(CRD.api_version, CRD.kind, "processes.setpoint.dev", None)
        assert fresh["spec"] == crd_of(process)["spec"]
    finally:
        await store.close()


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    """Wait until `condition()` holds: another process's change reaches this one as its
    store polls the log (no event to wait on: the registry is not a store)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 (a condition of a registry, not an event)
            await asyncio.sleep(0.01)


def _schema_text(registry: Registry) -> str:
    validator = registry.get("example.com/v1", "Widget").validator
    assert isinstance(validator, SchemaValidator)
    return validator.text


def _setpoint(
    directory: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    store = f"sqlite:///{directory / 'state.db'}"
    return subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", store, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=directory,
        env=env,
        timeout=60,
    )


def _write(directory: Path, name: str, doc: dict[str, Any]) -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_a_crd_applied_with_the_cli_defines_a_kind_with_no_python(tmp_path: Path) -> None:
    done = _setpoint(tmp_path, "apply", "-f", _write(tmp_path, "crd.yaml", widget_crd()))
    assert (done.returncode, done.stdout.strip()) == (
        0,
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created",
    ), done.stderr
    done = _setpoint(tmp_path, "apply", "-f", _write(tmp_path, "w.yaml", widget({"size": 3})))
    assert (done.returncode, done.stdout.strip()) == (0, "widget.example.com/w created"), (
        done.stderr
    )

    bad = widget({"size": 3, "colour": "green"})
    bad["metadata"]["name"] = "bad"
    refused = _setpoint(tmp_path, "apply", "-f", _write(tmp_path, "bad.yaml", bad))
    assert refused.returncode != 0
    assert "spec.colour" in refused.stderr
    assert "not one of" in refused.stderr

    listed = _setpoint(tmp_path, "get", "widgets")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "SIZE", "AGE"]
    assert [row.split()[:3] for row in rows] == [["w", "-", "3"]]
    shown = _setpoint(tmp_path, "get", "crd", "widgets.example.com", "-o", "yaml")
    assert yaml.safe_load(shown.stdout)["spec"]["names"]["kind"] == "Widget", shown.stderr


@pytest.mark.parametrize("server", ["etcd_server", "postgresql_server"])
async def test_a_distributed_store_opened_later_knows_the_kinds_of_its_crds(
    server: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(server).new_url()
    first = await open_store(url, Registry())
    try:
        await first.create(widget_crd())
        await first.create(widget({"size": 2}))
        later = await open_store(url, Registry())
        try:
            items, _ = await later.list("example.com/v1", "Widget")
            assert [o["spec"] for o in items] == [{"size": 2, "colour": "red"}]
            with pytest.raises(Invalid) as caught:
                await later.create({**widget({"size": 0}), "metadata": {"name": "bad"}})
            assert caught.value.field == "spec.size"
        finally:
            await later.close()
    finally:
        await first.close()
