"""Property: for any sequence of writes, the store agrees with a simple reference model, and
the watch stream replayed from the start rebuilds exactly what `list` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance_kit import API, by_key, close_watch, replay, rv, take_until, widget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.errors import AlreadyExists, NotFound

FIN = "test.setpoint.dev/hold"

keys = st.tuples(st.sampled_from(["default", "other"]), st.sampled_from(["a", "b", "c"]))
sizes = st.integers(0, 3)
label_maps = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db", ""]), max_size=2
)
label_edits = st.dictionaries(
    st.sampled_from(["app", "tier"]),
    st.one_of(st.none(), st.sampled_from(["web", "db"])),
    max_size=2,
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), keys, sizes, label_maps, st.booleans()),
        st.tuples(st.just("update"), keys, sizes),
        st.tuples(st.just("update_status"), keys, st.sampled_from(["Pending", "Running"])),
        st.tuples(st.just("merge"), keys, st.one_of(st.none(), sizes), label_edits),
        st.tuples(st.just("json"), keys, sizes),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("unfinalize"), keys),
    ),
    max_size=25,
)


@dataclass
class Expected:
    """What the reference model says one object looks like."""

    size: int
    labels: dict[str, str]
    finalizers: list[str]
    generation: int = 1
    phase: str | None = None
    terminating: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def resize(self, size: int) -> None:
        if size != self.size:
            self.size = size
            self.generation += 1


async def run(store, ops) -> dict[tuple[str, str], Expected]:
    """Apply `ops` to the store and to the model; check each outcome as it comes."""
    model: dict[tuple[str, str], Expected] = {}
    for op, key, *args in ops:
        ns, name = key
        exists = key in model
        try:
            if op == "create":
                size, labels, held = args
                await store.create(
                    widget(
                        name, size, namespace=ns, labels=labels, finalizers=[FIN] if held else None
                    )
                )
                model[key] = Expected(size, dict(labels), [FIN] if held else [])
            elif op in ("update", "update_status", "unfinalize"):
                obj = await store.get(API, "Widget", name, namespace=ns)
                if op == "update":
                    obj["spec"]["size"] = args[0]
                    await store.update(obj)
                    model[key].resize(args[0])
                elif op == "update_status":
                    await store.update_status(dict(obj, status={"phase": args[0]}))
                    model[key].phase = args[0]
                else:
                    obj["metadata"]["finalizers"] = []
                    await store.update(obj)
                    model[key].finalizers = []
                    if model[key].terminating:
                        del model[key]
            elif op == "merge":
                size, edits = args
                patch: dict[str, Any] = {"metadata": {"labels": edits}}
                if size is not None:
                    patch["spec"] = {"size": size}
                await store.patch(API, "Widget", name, patch, namespace=ns)
                for k, v in edits.items():
                    if v is None:
                        model[key].labels.pop(k, None)
                    else:
                        model[key].labels[k] = v
                if size is not None:
                    model[key].resize(size)
            elif op == "json":
                ops_ = [{"op": "replace", "path": "/spec/size", "value": args[0]}]
                await store.patch(API, "Widget", name, ops_, namespace=ns, patch_type="json")
                model[key].resize(args[0])
            elif op == "delete":
                await store.delete(API, "Widget", name, namespace=ns)
                if model[key].finalizers:
                    if not model[key].terminating:  # the deletion mark bumps generation
                        model[key].terminating = True
                        model[key].generation += 1
                else:
                    del model[key]
        except AlreadyExists:
            assert op == "create", (op, key)
            assert exists, (op, key)
        except NotFound:
            assert not exists, (op, key)
        else:
            assert exists == (op != "create"), (op, key)
    return model


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
async def test_watch_replay_rebuilds_the_list(stores, ops) -> None:
    store = await stores.open()
    try:
        start = await store.revision()
        model = await run(store, ops)
        items, revision = await store.list(API, "Widget")
        assert revision == await store.revision()

        # The store agrees with the model.
        got = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}
        assert set(got) == set(model)
        for key, want in model.items():
            meta = got[key]["metadata"]
            assert got[key]["spec"]["size"] == want.size, key
            assert (meta.get("labels") or {}) == want.labels, key
            assert (meta.get("finalizers") or []) == want.finalizers, key
            assert meta["generation"] == want.generation, key
            assert bool(meta.get("deletionTimestamp")) == want.terminating, key
            assert (got[key].get("status") or {}).get("phase") == want.phase, key

        # Replaying the watch stream from the start gives the same objects, revisions
        # and contents, and the stream has no gaps.
        if revision == start:
            assert items == []
            return
        events = store.watch(API, "Widget", since=start)
        try:
            history = await take_until(events, revision)
        finally:
            await close_watch(events)
        assert [e.revision for e in history] == list(range(start + 1, revision + 1))
        rebuilt = replay(history)
        assert {k: rv(o) for k, o in rebuilt.items()} == {
            k: rv(o) for k, o in by_key(items).items()
        }
        assert rebuilt == by_key(items)
    finally:
        await store.close()


FILTERS = [
    # (namespace, label selector, labels of a sentinel object that passes the filter)
    (None, "app=web", {"app": "web"}),
    ("other", "app!=web", {}),
    (None, "!tier", {}),
    ("default", "tier in (web,db)", {"tier": "db"}),
    (None, "app,tier notin (db)", {"app": ""}),
]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
async def test_filtered_watch_replay_rebuilds_the_filtered_list(stores, ops) -> None:
    """With a namespace and a label selector, a watch turns an object moving into or out of
    the selection into ADDED or DELETED: replayed, it still rebuilds the filtered list."""
    store = await stores.open()
    try:
        start = await store.revision()
        await run(store, ops)
        # One sentinel per filter, after every other write: when a filtered stream reaches
        # the last sentinel it passes, it has shown everything its list holds.
        for i, (namespace, _, labels) in enumerate(FILTERS):
            await store.create(widget(f"zz-sentinel-{i}", namespace=namespace, labels=labels))
        for namespace, selector, _ in FILTERS:
            items, _ = await store.list(API, "Widget", namespace=namespace, label_selector=selector)
            end = max(rv(o) for o in items if o["metadata"]["name"].startswith("zz-sentinel-"))
            events = store.watch(
                API, "Widget", namespace=namespace, since=start, label_selector=selector
            )
            try:
                history = await take_until(events, end)
            finally:
                await close_watch(events)
            assert replay(history) == by_key(items), (namespace, selector)
    finally:
        await store.close()
