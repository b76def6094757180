"""`setpoint get -o jsonpath=...` and `-o custom-columns=...` print what the real kubectl
prints for the same objects of the same store (`setpoint serve`): kubectl's JSONPath
dialect (`range`/`end`, filters, unions, slices, recursive descent, literals) and its
column layout."""

from __future__ import annotations

import subprocess
import sys

import pytest
from api_kit import TIMEOUT, Server, process

NAMESPACE = "jsonpath"

TEMPLATES = [
    "{.items[*].metadata.name}",
    '{range .items[*]}{.metadata.name}{"\\t"}{.spec.args}{"\\n"}{end}',
    '{.items[?(@.metadata.labels.tier=="front")].metadata.name}',
    '{.items[?(@.metadata.labels.tier!="front")].metadata.name}',
    "{.items[?(@.metadata.labels.tier)].metadata.name}",
    "{.items[?(@.spec.terminationGracePeriodSeconds>20)].metadata.name}",
    "{.items[0].metadata.name}",
    "{.items[-1:].metadata.name}",
    "{.items[0:2].metadata.name}",
    "{.items[*].spec.args[1]}",
    "{.items[*]['metadata.name', 'kind']}",
    "{.items[0].spec.backoff}",
    "{.items[0].metadata.labels}",
    "{..labels.tier}",
    "names: {.items[*].metadata.name} kind: {.kind}",
    "{.items[*].spec.nothere}",
    '{range .items[*]}{range .spec.args[*]}[{@}]{end}{"\\n"}{end}',
    "{.items[?(@.metadata.name=='b')].metadata.name}",
    "{.items[?(@.spec.terminationGracePeriodSeconds<=30)].spec.terminationGracePeriodSeconds}",
]


@pytest.fixture(scope="module")
def objects(server: Server) -> Server:
    docs = [
        process("a", "sleep", "100", labels={"tier": "front"}, namespace=NAMESPACE),
        process("b", "sleep", "200", labels={"tier": "back"}, namespace=NAMESPACE),
        process("c", "sleep", "300", namespace=NAMESPACE),
    ]
    docs[1]["spec"]["terminationGracePeriodSeconds"] = 45
    server.ok("apply", "-f", str(server.write("jsonpath.yaml", *docs)))
    return server


def setpoint(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", server.store, "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        cwd=server.directory,
        env=server.env,
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize("template", TEMPLATES)
def test_get_o_jsonpath_prints_what_kubectl_prints(objects: Server, template: str) -> None:
    want = objects.ok("get", "processes", "-n", NAMESPACE, "-o", f"jsonpath={template}").out
    got = setpoint(objects, "get", "processes", "-o", f"jsonpath={template}")
    assert (got.returncode, got.stderr) == (0, "")
    assert got.stdout == want


def test_get_one_object_o_jsonpath_reads_the_object_itself(objects: Server) -> None:
    template = "{.metadata.name} {.spec.args[*]}"
    want = objects.ok("get", "process", "b", "-n", NAMESPACE, "-o", f"jsonpath={template}").out
    got = setpoint(objects, "get", "process", "b", "-o", f"jsonpath={template}")
    assert got.stdout == want == "b sleep 200"


@pytest.mark.parametrize(
    "spec",
    [
        "NAME:.metadata.name,TIER:.metadata.labels.tier,ARGS:.spec.args",
        "N:{.metadata.name},GRACE:spec.terminationGracePeriodSeconds,A1:.spec.args[1]",
    ],
)
def test_get_o_custom_columns_prints_what_kubectl_prints(objects: Server, spec: str) -> None:
    want = objects.ok("get", "processes", "-n", NAMESPACE, "-o", f"custom-columns={spec}").out
    got = setpoint(objects, "get", "processes", "-o", f"custom-columns={spec}")
    assert (got.returncode, got.stderr) == (0, "")
    assert got.stdout == want


def test_a_bad_template_is_refused_in_one_line(objects: Server) -> None:
    got = setpoint(objects, "get", "processes", "-o", "jsonpath={.items[")
    assert (got.returncode, got.stderr) == (
        1,
        "error: argument -o/--output: jsonpath: unclosed action (see 'setpoint get --help')\n",
    )
    out_of_range = setpoint(objects, "get", "processes", "-o", "jsonpath={.items[7]}")
    assert out_of_range.returncode == 1
    assert out_of_range.stderr == "error: array index out of bounds: index 7, length 3\n"
