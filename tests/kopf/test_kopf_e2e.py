"""kopf's own end-to-end suite (tests/e2e of its released sdist: every example operator
of its examples/ run through `KopfRunner`, with `kubectl apply/delete -f
examples/obj.yaml`) passes against a real `setpoint serve`, run as it is: only the
kubeconfig points at setpoint, after examples/crd.yaml and peering.yaml are applied with
kubectl as a Kubernetes user applies them (peering.yaml twice: a first apply creates its
CRDs and, as on Kubernetes, cannot map its objects yet).

Example 17-admission is reported, not required: see `NOT_YET`.

The suite's own waits and time limits decide its examples' outcomes (it is kopf's suite,
run as it is); each example ends on a log line it waits for, within the limits it sets.
Those limits are fixed seconds, which a loaded machine can overrun: an example that fails
is run once more, alone, and the report says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from api_kit import kubectl_binary, start_server
from kopf_kit import kopf_tree, run_e2e_suite

NOT_YET = {
    "17-admission": "setpoint calls admission webhooks (tests/store/test_webhooks_kopf.py runs "
    "kopf's own WebhookServer), but this example's WebhookAutoServer makes its certificate "
    "with kopf's dev extra (oscrypto, certbuilder), whose latest oscrypto cannot read this "
    "machine's libcrypto version"
}
"""Examples whose outcome is reported but not required, and why."""


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_kopfs_own_e2e_suite_passes_against_setpoint(tmp_path: Path) -> None:
    tree = kopf_tree()
    kubectl = kubectl_binary()
    server = start_server(tmp_path / "server")
    try:
        server.ok("apply", "-f", str(tree / "examples" / "crd.yaml"))
        peering = str(tree / "peering.yaml")  # its CRDs, then objects of them
        first = server.kubectl("apply", "-f", peering)  # as on Kubernetes: the CRDs only
        assert first.code == 0 or "ensure CRDs are installed first" in first.err, first
        server.ok("apply", "-f", peering)
        run = run_e2e_suite(tree, server.kubeconfig, kubectl, tmp_path)
        assert run.outcomes, run.output
        print(f"kopf_e2e_examples_passed: {len(run.passed())} of {len(run.outcomes)}")
        print(run.report())
        failing = [n for n, o in run.outcomes.items() if n not in NOT_YET and o != "passed"]
        if failing:
            again = run_e2e_suite(tree, server.kubeconfig, kubectl, tmp_path, only=failing)
            print(f"run again: {again.report()}")
            failing = [n for n in failing if again.outcomes.get(n) != "passed"]
            assert not failing, f"{again.report()}\n\n{run.output}\n\n{again.output}"
    finally:
        server.stop()
