"""What the tests of the Kubernetes clients share: the Widget kind (a CRD with a status
subresource), a Widget manifest, and `World`, which reads what the server stores (plain
HTTPS, beside the client under test) and pushes the store's history past a resourceVersion.

How a resourceVersion gets too old: the store keeps `history=N` revisions of watch history
(`setpoint.store.open_store`) and compacts older ones as it writes (a memory store, once its
log is twice that long). `compacting_server()` serves a store that keeps 3, so a dozen writes
leave any earlier resourceVersion behind, and a watch from it answers 410 Gone.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from setpoint.testing import ApiServer

TIMEOUT = 30.0
"""Seconds any one wait (a watch event, a server answer) may take before the test fails."""

GROUP, VERSION, PLURAL, KIND = "example.com", "v1", "widgets", "Widget"
API_VERSION = f"{GROUP}/{VERSION}"
NAMESPACE = "default"
WIDGETS = f"/apis/{API_VERSION}/namespaces/{NAMESPACE}/{PLURAL}"
CONFIG_MAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
FINALIZER = "example.com/cleanup"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": KIND},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "colour": {"type": "string"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "observedGeneration": {"type": "integer"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(
    name: str, *, size: int = 1, labels: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    """A Widget manifest in the default namespace."""
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE, **meta}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": {"size": size}}


class World:
    """The server as it is: what it stores, read over HTTPS with the admin token (trusting
    the server's certificate only), and writes no client under test makes."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.http = httpx.Client(
            base_url=api.url,
            verify=ssl.create_default_context(cafile=str(api.certificate)),
            headers={"Authorization": f"Bearer {api.token}"},
            timeout=TIMEOUT,
        )

    def widget(self, name: str, collection: str = WIDGETS) -> dict[str, Any] | None:
        """The Widget `name` (or the object of `collection`) as stored, or None when there
        is none."""
        answer = self.http.get(f"{collection}/{name}")
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def create(self, obj: dict[str, Any], path: str = WIDGETS) -> dict[str, Any]:
        answer = self.http.post(path, json=obj)
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()
        return created

    def resize(self, name: str, size: int) -> str:
        """Merge-patch the Widget's size; its new resourceVersion."""
        answer = self.http.patch(
            f"{WIDGETS}/{name}",
            json={"spec": {"size": size}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert answer.status_code == 200, answer.text
        version: str = answer.json()["metadata"]["resourceVersion"]
        return version

    def outdate(self, version: str) -> None:
        """Write until the store's history no longer reaches back to `version` (on a
        `compacting_server`): 12 writes to a ConfigMap, then a raw watch from `version` is
        checked to answer 410."""
        filler = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "filler"}}
        self.create(filler, CONFIG_MAPS)
        for i in range(12):
            answer = self.http.patch(
                f"{CONFIG_MAPS}/filler",
                json={"data": {"i": str(i)}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert answer.status_code == 200, answer.text
        with self.http.stream(
            "GET", WIDGETS, params={"watch": "true", "resourceVersion": version}
        ) as stream:
            first = next(stream.iter_lines())
        assert '"code":410' in first.replace(" ", ""), first

    def close(self) -> None:
        self.http.close()


@contextmanager
def serving(*, store_url: str | None = None) -> Iterator[tuple[ApiServer, World]]:
    """An `ApiServer` with the Widget CRD in place, and its `World`."""
    with ApiServer(store_url=store_url) as api:
        world = World(api)
        try:
            world.create(WIDGET_CRD, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            yield api, world
        finally:
            world.close()


def compacting_server() -> Any:
    """`serving()` on a memory store that keeps 3 revisions of history (see the module
    docstring)."""
    return serving(store_url="memory://?history=3")
