"""The `etcd://` store beyond the conformance suite: its URL, a store that is not there or of
a newer layout, prefixes kept apart, the missing extra (or a grpcio or protobuf too old, or
another etcd client's stubs in the process), leader election, compaction when a process
starts, closing, and a server restart (calls made while it is away fail with
`StoreUnavailable`; watchers resume after their last revision with nothing lost or
duplicated). Each restart test runs its own etcd server (tests/etcd_server.py), so that
stopping it disturbs no other test."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from etcd_server import EtcdServer
from setpoint.errors import Invalid, NotFound, StoreUnavailable
from setpoint.model import Kind, Registry, Schema
from setpoint.store import Store, open_store

TIMEOUT = 60.0
"""Seconds any wait may take before the test fails (never spent when all is well)."""


class ItemSpec(Schema):
    n: int = 0


ITEM = Kind("test.setpoint.dev/v1", "Item", "items", namespaced=True, spec=ItemSpec)


def registry() -> Registry:
    r = Registry()
    r.register(ITEM)
    return r


def item(name: str, n: int = 0) -> dict[str, object]:
    return {
        "apiVersion": ITEM.api_version,
        "kind": "Item",
        "metadata": {"name": name},
        "spec": {"n": n},
    }


@pytest.fixture
def own_etcd(etcd_server: EtcdServer) -> Iterator[EtcdServer]:
    """An etcd server of this test's own, which it may stop and start (skipped, or failed in
    CI, as `etcd_server` is when etcd is missing)."""
    with EtcdServer() as server:
        yield server


async def until_available(store: Store) -> int:
    """The store's revision, once its server answers again."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            try:
                return await store.revision()
            except StoreUnavailable:
                await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    "url",
    [
        "etcd://",
        "etcd://host:notaport",
        "etcd://host:2379/path",
        "etcd://host:2379?prefix=/no-trailing-slash",
        "etcd://host:2379?color=blue",
        "etcd://host:2379?sync=sometimes",
        "etcd://host:2379?history=0",
    ],
)
async def test_a_bad_url_is_invalid_naming_the_store(url: str) -> None:
    with pytest.raises(Invalid) as caught:
        await open_store(url, registry())
    assert caught.value.field == "store"


async def test_reading_never_creates_a_store(etcd_server: EtcdServer) -> None:
    url = etcd_server.new_url()
    with pytest.raises(NotFound, match="reading never creates one"):
        await open_store(url, registry(), create=False)
    store = await open_store(url, registry())
    await store.create(item("a"))
    await store.close()
    reader = await open_store(url, registry(), create=False)
    try:
        assert [
            o["metadata"]["name"] for o in (await reader.list(ITEM.api_version, "Item"))[0]
        ] == ["a"]
    finally:
        await reader.close()


async def test_stores_under_two_prefixes_hold_their_own_objects(etcd_server: EtcdServer) -> None:
    one = await open_store(etcd_server.new_url(), registry())
    two = await open_store(etcd_server.new_url(), registry())
    try:
        await one.create(item("a", 1))
        await two.create(item("a", 2))
        assert (await one.get(ITEM.api_version, "Item", "a"))["spec"] == {"n": 1}
        assert [o["spec"] for o in (await two.list(ITEM.api_version, "Item"))[0]] == [{"n": 2}]
    finally:
        await one.close()
        await two.close()


def open_etcd_store_in_python(prelude: str) -> str:
    """What opening an etcd store prints in a fresh Python after `prelude` (the `Invalid`
    it raises, or a traceback)."""
    script = textwrap.dedent(
        """
        import asyncio, sys
        from setpoint.errors import Invalid
        from setpoint.store import open_store
        try:
            asyncio.run(open_store("etcd://127.0.0.1:1"))
        except Invalid as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(prelude) + script],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("module", ["grpc", "google.protobuf"])
def test_without_the_extra_the_error_names_it(module: str) -> None:
    """A Python where grpcio or protobuf cannot be imported (as if `setpoint[etcd]` were not
    installed)."""
    # importing it raises ImportError, as when missing
    said = open_etcd_store_in_python(f"import sys; sys.modules[{module!r}] = None\n")
    assert "needs its gRPC client (grpcio and protobuf)" in said
    assert "pip install 'setpoint[etcd]'" in said
    assert "Traceback" not in said


@pytest.mark.parametrize(
    ("prelude", "named"),
    [
        ("import grpc; grpc.__version__ = '1.0.0'\n", "grpcio>="),
        (
            "from google.protobuf import runtime_version; runtime_version.MAJOR = 3\n",
            "runtime 3.",
        ),
    ],
    ids=["grpcio", "protobuf"],
)
def test_a_grpc_client_older_than_the_stubs_need_is_one_line_naming_it(
    prelude: str, named: str
) -> None:
    """An environment whose grpcio or protobuf is older than the generated stubs were made
    with (installed without the extra's lower bounds): one line, no traceback."""
    said = open_etcd_store_in_python(prelude)
    assert "the etcd store's gRPC client is older than it needs" in said
    assert named in said
    assert "pip install --upgrade 'setpoint[etcd]'" in said
    assert "Traceback" not in said
    assert len(said.splitlines()) == 1


def test_another_etcd_clients_messages_in_the_process_are_one_line_naming_them() -> None:
    """protobuf keeps one registry of message names per process: another etcd client's
    generated stubs (aetcd's, etcd3's) loaded first already hold etcd's names."""
    said = open_etcd_store_in_python(
        """
        from google.protobuf import descriptor_pb2, descriptor_pool
        other = descriptor_pb2.FileDescriptorProto(name="other/kv.proto", package="mvccpb")
        other.message_type.add(name="KeyValue")
        descriptor_pool.Default().AddSerializedFile(other.SerializeToString())
        """
    )
    assert "cannot load its gRPC messages beside another etcd client's" in said
    assert "duplicate symbol 'mvccpb.KeyValue'" in said
    assert "Traceback" not in said
    assert len(said.splitlines()) == 1


async def test_a_restart_loses_no_watch_event_and_fails_calls_retryably(
    own_etcd: EtcdServer,
) -> None:
    store = await open_store(own_etcd.new_url(), registry())
    acknowledged: list[int] = []
    unavailable: list[StoreUnavailable] = []
    stop_writing = asyncio.Event()
    progress = asyncio.Condition()

    async def acknowledged_reach(count: int) -> None:
        async with asyncio.timeout(TIMEOUT), progress:
            await progress.wait_for(lambda: len(acknowledged) >= count)

    async def write() -> None:
        i = 0
        while not stop_writing.is_set():
            try:
                written = await store.create(item(f"i{i}", i))
                acknowledged.append(int(written["metadata"]["resourceVersion"]))
                async with progress:
                    progress.notify_all()
            except StoreUnavailable as exc:  # the only error a restart may cause
                unavailable.append(exc)
                await asyncio.sleep(0.01)  # pace the retries while the server is away
            i += 1

    try:
        start = await store.revision()
        events = store.watch(ITEM.api_version, "Item", since=start)
        writer = asyncio.create_task(write())
        await acknowledged_reach(20)
        await asyncio.to_thread(own_etcd.restart)
        await until_available(store)
        await acknowledged_reach(len(acknowledged) + 20)
        stop_writing.set()
        await writer
        end = await store.revision()

        seen: list[int] = []
        async with asyncio.timeout(TIMEOUT):
            async for event in events:
                assert event.type == "ADDED"
                seen.append(event.revision)
                if event.revision >= end:
                    break
        assert unavailable, "no call was made while the server was away"
        assert "retry" in str(unavailable[0])
        assert seen == list(range(start + 1, end + 1)), "lost or repeated events"
        assert set(acknowledged) <= set(seen)
        items, listed_at = await store.list(ITEM.api_version, "Item")
        assert listed_at == end
        assert len(items) == len(seen)
    finally:
        await store.close()


async def test_calls_fail_while_the_server_is_stopped_and_work_once_it_is_back(
    own_etcd: EtcdServer,
) -> None:
    store = await open_store(own_etcd.new_url(), registry())
    try:
        first = await store.create(item("first"))
        since = int(first["metadata"]["resourceVersion"])
        await asyncio.to_thread(own_etcd.stop)
        with pytest.raises(StoreUnavailable):
            await store.get(ITEM.api_version, "Item", "first")
        await asyncio.to_thread(own_etcd.start)
        await until_available(store)
        events = store.watch(ITEM.api_version, "Item", since=since - 1)
        second = await store.create(item("second"))
        async with asyncio.timeout(TIMEOUT):
            got = [await anext(events), await anext(events)]
        assert [e.object for e in got] == [first, second]
    finally:
        await store.close()


async def test_no_server_at_the_address_is_unavailable() -> None:
    from etcd_server import free_port

    with pytest.raises(StoreUnavailable, match="retry"):
        await open_store(f"etcd://127.0.0.1:{free_port()}", registry())


async def test_closing_the_store_ends_its_watches(etcd_server: EtcdServer) -> None:
    store = await open_store(etcd_server.new_url(), registry())
    events = store.watch(ITEM.api_version, "Item", since=await store.revision())
    waiting = asyncio.create_task(anext(events, None))
    await store.create(item("a"))
    assert (await asyncio.wait_for(waiting, TIMEOUT)) is not None
    waiting = asyncio.create_task(anext(events, None))
    await store.close()
    assert (await asyncio.wait_for(waiting, TIMEOUT)) is None


async def test_one_leader_among_processes_sharing_the_store(etcd_server: EtcdServer) -> None:
    """The runtime's leader election (CAS on a Lease object) holds on etcd: two stores (two
    connections, as two processes have) never both hold the lease."""
    from setpoint.runtime.leases import LeaderElector

    url = etcd_server.new_url()
    a, b = await open_store(url, registry()), await open_store(url, registry())
    try:
        first = LeaderElector(a, "controller", identity="a")
        second = LeaderElector(b, "controller", identity="b")
        assert await first.try_acquire()
        assert not await second.try_acquire()
        assert await first.release()
        assert await second.try_acquire()
        assert not await first.try_acquire()
        lease = await a.get("coordination.k8s.io/v1", "Lease", "controller")
        assert lease["spec"]["holderIdentity"] == "b"
    finally:
        await a.close()
        await b.close()


async def test_a_store_of_a_newer_layout_is_refused(etcd_server: EtcdServer) -> None:
    from grpc import aio

    from setpoint.store.etcd import LAYOUT
    from setpoint.store.etcd_api import etcdserverpb_pb2, etcdserverpb_pb2_grpc

    url = etcd_server.new_url()
    prefix = url.split("prefix=")[1].replace("%2F", "/")
    channel = aio.insecure_channel(etcd_server.address)
    try:
        marker = f"{prefix}store".encode()
        value = f'{{"store":"setpoint","layout":{LAYOUT + 1}}}'.encode()
        put = etcdserverpb_pb2.PutRequest(key=marker, value=value)
        await etcdserverpb_pb2_grpc.KVStub(channel).Put(put)
    finally:
        await channel.close()
    with pytest.raises(Invalid, match="upgrade setpoint"):
        await open_store(url, registry())


async def test_a_process_opening_the_store_does_not_compact_at_once(
    etcd_server: EtcdServer,
) -> None:
    """`history=N` compacts once 2N revisions piled up since etcd's last compaction, which
    a store learns when opened: a newly started process does not compact at its first write."""
    url = etcd_server.new_url()
    first = await open_store(url, registry())
    try:
        for i in range(20):
            await first.create(item(f"a{i}"))
        now = await first.revision()
        await first.compact(now - 7)
    finally:
        await first.close()
    second = await open_store(with_history(url, 5), registry())
    try:
        await second.create(item("b"))  # 8 revisions after the compaction: not 10 yet
        events = second.watch(ITEM.api_version, "Item", since=now - 7)
        async with asyncio.timeout(TIMEOUT):
            assert (await anext(events)).revision == now - 6
    finally:
        await second.close()


def with_history(url: str, history: int) -> str:
    return f"{url}&history={history}"
