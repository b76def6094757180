"""Annotations over 256 KiB are refused as Kubernetes refuses them: the keys and values of
`metadata.annotations` together may hold 262144 bytes (UTF-8); a create or an update of
262145 is 422 Invalid, "metadata.annotations: Too long: must have at most 262144 bytes",
and nothing is stored; 262144 exactly is accepted. Through the official client, whose
`ApiException` carries the server's Status."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from clients_kit import GROUP, NAMESPACE, PLURAL, VERSION, World, widget
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from setpoint.testing import ApiServer

WIDGET = (GROUP, VERSION, NAMESPACE, PLURAL)
LIMIT = 262144
KEY = "example.com/blob"


def annotations(total: int) -> dict[str, str]:
    """Annotations whose keys and values hold `total` bytes, some of them two-byte characters
    (bytes are counted, not characters)."""
    value = "é" * 1000
    return {
        "example.com/note": value,
        KEY: "x" * (total - len("example.com/note") - 2000 - len(KEY)),
    }


@pytest.fixture
def custom(served: tuple[ApiServer, World]) -> Iterator[client.CustomObjectsApi]:
    with config.new_client_from_config(config_file=str(served[0].kubeconfig)) as api_client:
        yield client.CustomObjectsApi(api_client)


def assert_too_long(refused: ApiException) -> None:
    assert refused.status == 422
    body = json.loads(refused.body)
    assert body["reason"] == "Invalid"
    assert "metadata.annotations: Too long: must have at most 262144 bytes" in body["message"]
    assert [cause["field"] for cause in body["details"]["causes"]] == ["metadata.annotations"]


def test_annotations_over_256_kib_are_refused_and_nothing_is_stored(
    custom: client.CustomObjectsApi, served: tuple[ApiServer, World]
) -> None:
    world = served[1]
    assert sum(len(k.encode()) + len(v.encode()) for k, v in annotations(LIMIT).items()) == LIMIT

    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(
            *WIDGET, widget("too-big", annotations=annotations(LIMIT + 1))
        )
    assert_too_long(refused.value)
    assert world.widget("too-big") is None

    custom.create_namespaced_custom_object(*WIDGET, widget("grows", annotations={KEY: "small"}))
    before = world.widget("grows")
    current = custom.get_namespaced_custom_object(*WIDGET, "grows")
    current["metadata"]["annotations"] = annotations(LIMIT + 1)
    with pytest.raises(ApiException) as refused:
        custom.replace_namespaced_custom_object(*WIDGET, "grows", current)
    assert_too_long(refused.value)
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object(
            *WIDGET, "grows", {"metadata": {"annotations": annotations(LIMIT + 1)}}
        )
    assert_too_long(refused.value)
    assert world.widget("grows") == before


def test_annotations_of_exactly_256_kib_are_accepted(
    custom: client.CustomObjectsApi, served: tuple[ApiServer, World]
) -> None:
    world = served[1]
    custom.create_namespaced_custom_object(
        *WIDGET, widget("just-fits", annotations=annotations(LIMIT))
    )
    assert world.widget("just-fits")["metadata"]["annotations"] == annotations(LIMIT)  # type: ignore[index]

    custom.create_namespaced_custom_object(*WIDGET, widget("grows-to-fit"))
    current = custom.get_namespaced_custom_object(*WIDGET, "grows-to-fit")
    current["metadata"]["annotations"] = annotations(LIMIT)
    custom.replace_namespaced_custom_object(*WIDGET, "grows-to-fit", current)
    assert world.widget("grows-to-fit")["metadata"]["annotations"] == annotations(LIMIT)  # type: ignore[index]
