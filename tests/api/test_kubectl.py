"""The real kubectl against `setpoint serve`: apply, diff, get in every form, watch,
describe, patch, label, annotate, scale, delete with a finalizer, wait, explain, and the
answers to bad tokens. Each test checks what the store holds afterwards."""

from __future__ import annotations

import json

from api_kit import TOKENS, Server, process

SPEC_ARGS = '{"spec":{"args":["sleep","%s"]}}'


def test_apply_creates_then_a_changed_file_updates(server: Server) -> None:
    path = server.write("apply.yaml", process("applied", "sleep", "1000", labels={"app": "a"}))
    assert "process.setpoint.dev/applied created" in server.ok("apply", "-f", str(path)).out
    created = server.stored("Process", "applied")
    assert created["metadata"]["generation"] == 1

    server.write("apply.yaml", process("applied", "sleep", "2000", labels={"app": "a"}))
    assert "process.setpoint.dev/applied configured" in server.ok("apply", "-f", str(path)).out
    updated = server.stored("Process", "applied")
    assert updated["spec"]["args"] == ["sleep", "2000"]
    assert updated["metadata"]["generation"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]

    assert "unchanged" in server.ok("apply", "-f", str(path)).out
    assert (
        server.stored("Process", "applied")["metadata"]["resourceVersion"]
        == (updated["metadata"]["resourceVersion"])
    )


def test_diff_shows_the_change_and_writes_nothing(server: Server) -> None:
    path = server.write("diff.yaml", process("diffed", "sleep", "1000"))
    server.ok("apply", "-f", str(path))
    before = server.stored("Process", "diffed")
    server.write("diff.yaml", process("diffed", "sleep", "3000"))
    result = server.kubectl("diff", "-f", str(path))
    assert result.code == 1, result  # 1: there are differences
    assert '-  - "1000"' in result.out
    assert '+  - "3000"' in result.out
    assert server.stored("Process", "diffed") == before


def test_get_as_table_json_yaml_by_label_and_in_every_namespace(server: Server) -> None:
    server.ok(
        "apply",
        "-f",
        str(
            server.write(
                "get.yaml",
                process("get-a", labels={"tier": "front"}),
                process("get-b", labels={"tier": "back"}),
                process("get-c", labels={"tier": "front"}, namespace="other"),
            )
        ),
    )
    table = server.ok("get", "processes").out.splitlines()
    assert table[0].split()[0] == "NAME"
    assert {"get-a", "get-b"} <= {line.split()[0] for line in table[1:]}
    assert "get-c" not in server.ok("get", "processes").out

    listed = server.ok("get", "processes", "-o", "json").json()
    assert {"get-a", "get-b"} <= {item["metadata"]["name"] for item in listed["items"]}
    one = server.ok("get", "process", "get-a", "-o", "yaml").yaml()
    assert one["spec"]["args"] == ["sleep", "1000"]

    front = server.ok("get", "processes", "-l", "tier=front", "-o", "name").out.split()
    assert front == ["process.setpoint.dev/get-a"]

    everywhere = server.ok("get", "processes", "-A").out.splitlines()
    assert everywhere[0].split()[:2] == ["NAMESPACE", "NAME"]
    pairs = {tuple(line.split()[:2]) for line in everywhere[1:]}
    assert {("default", "get-a"), ("other", "get-c")} <= pairs


def test_output_templates_and_sorting(server: Server) -> None:
    server.ok(
        "apply",
        "-f",
        str(
            server.write(
                "tpl.yaml",
                process("tpl-b", "sleep", "20", labels={"set": "tpl"}),
                process("tpl-a", "sleep", "10", labels={"set": "tpl"}),
            )
        ),
    )
    path = server.ok("get", "process", "tpl-a", "-o", "jsonpath={.spec.args[1]}").out
    assert path == "10"
    columns = server.ok(
        "get",
        "processes",
        "-l",
        "set=tpl",
        "-o",
        "custom-columns=NAME:.metadata.name,SECONDS:.spec.args[1]",
        "--sort-by=.metadata.name",
    ).out.splitlines()
    assert [line.split() for line in columns] == [
        ["NAME", "SECONDS"],
        ["tpl-a", "10"],
        ["tpl-b", "20"],
    ]


def test_get_watch_sees_a_change_made_by_another_client(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("watched.yaml", process("watched", "sleep", "1"))))
    watch = server.start("get", "process", "watched", "-w", "-o", 'jsonpath={.spec.args[1]}{"\\n"}')
    watch.expect(lambda line: line == "1", "the first state")
    server.ok(
        "patch", "process", "watched", "--type=merge", "-p", '{"spec":{"args":["sleep","2"]}}'
    )
    watch.expect(lambda line: line == "2", "the change another client made")
    watch.kill()


def test_describe_shows_conditions_and_events(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("described.yaml", process("described"))))
    uid = server.stored("Process", "described")["metadata"]["uid"]
    server.ok(
        "patch",
        "process",
        "described",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "False",
                            "reason": "Starting",
                            "message": "waiting for the port",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ]
                }
            }
        ),
    )
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "described.1"},
        "involvedObject": {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Process",
            "name": "described",
            "namespace": "default",
            "uid": uid,
        },
        "reason": "Started",
        "message": "started pid 42",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "process-controller"},
    }
    server.ok("create", "-f", str(server.write("event.yaml", event)))
    described = server.ok("describe", "process", "described").out
    assert "Starting" in described
    assert "waiting for the port" in described
    events = described.split("Events:", 1)[1]
    assert "Started" in events
    assert "started pid 42" in events
    assert "process/described   started pid 42" in server.ok("get", "events").out


def test_patch_label_annotate(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("patched.yaml", process("patched"))))
    server.ok(
        "patch", "process", "patched", "--type=merge", "-p", '{"spec":{"args":["sleep","7"]}}'
    )
    server.ok(
        "patch",
        "process",
        "patched",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/args/0","value":"/bin/sleep"}]',
    )
    server.ok("label", "process", "patched", "tier=db")
    server.ok("annotate", "process", "patched", "owner=alice")
    stored = server.stored("Process", "patched")
    assert stored["spec"]["args"] == ["/bin/sleep", "7"]
    assert stored["metadata"]["labels"] == {"tier": "db"}
    assert stored["metadata"]["annotations"]["owner"] == "alice"
    refused = server.kubectl(
        "patch",
        "process",
        "patched",
        "--type=merge",
        "-p",
        '{"spec":{"restartPolicy":"Sometimes"}}',
    )
    assert refused.code == 1
    assert "restartPolicy" in refused.err
    assert server.stored("Process", "patched")["spec"]["restartPolicy"] == "Always"


def test_scale_a_deployment(server: Server) -> None:
    deployment = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "scaled"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "scaled"}},
            "template": {
                "metadata": {"labels": {"app": "scaled"}},
                "spec": {"args": ["sleep", "9"]},
            },
        },
    }
    server.ok("apply", "-f", str(server.write("deployment.yaml", deployment)))
    assert "scaled" in server.ok("scale", "deployment", "scaled", "--replicas=3").out
    assert server.stored("Deployment", "scaled")["spec"]["replicas"] == 3


def test_delete_with_a_finalizer_lingers_until_it_is_removed(server: Server) -> None:
    held = process("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    server.ok("apply", "-f", str(server.write("held.yaml", held)))
    server.ok("delete", "process", "held", "--wait=false")
    lingering = server.stored("Process", "held")
    assert lingering["metadata"]["deletionTimestamp"]
    shown = server.ok("get", "process", "held", "-o", "jsonpath={.metadata.deletionTimestamp}")
    assert shown.out == lingering["metadata"]["deletionTimestamp"]

    server.ok(
        "patch",
        "process",
        "held",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    with server.reader() as reader:
        names = [o["metadata"]["name"] for o in reader.list("setpoint.dev/v1alpha1", "Process")[0]]
    assert "held" not in names
    gone = server.kubectl("get", "process", "held")
    assert gone.code == 1
    assert "NotFound" in gone.err


def test_wait_for_a_condition(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("awaited.yaml", process("awaited"))))
    waiting = server.start("wait", "--for=condition=Ready", "process/awaited", "--timeout=60s")
    ready = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Running",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }
    server.ok(
        "patch",
        "process",
        "awaited",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(ready),
    )
    waiting.expect(lambda line: "condition met" in line, "the condition met")
    assert waiting.ended()[0] == 0


def test_explain(server: Server) -> None:
    explained = server.ok("explain", "processes.spec").out
    assert "args" in explained


def test_a_wrong_token_is_unauthorized(server: Server) -> None:
    result = server.kubectl("get", "processes", token="not-a-token")
    assert result.code == 1
    # kubectl's words for a 401: "(Unauthorized)" when its discovery cache is warm, "(the
    # server has asked for the client to provide credentials)" when discovery met it.
    assert "error: You must be logged in to the server" in result.err, result.err


def test_a_view_token_reads_but_cannot_write(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("viewed.yaml", process("viewed"))))
    assert "viewed" in server.ok("get", "processes", token=TOKENS["view"]).out
    refused = server.kubectl("delete", "process", "viewed", token=TOKENS["view"])
    assert refused.code == 1
    assert "Forbidden" in refused.err
    assert "view" in refused.err
    assert server.stored("Process", "viewed")["metadata"].get("deletionTimestamp") is None
    edited = server.kubectl("label", "process", "viewed", "by=edit", token=TOKENS["edit"])
    assert edited.code == 0, edited
    assert server.stored("Process", "viewed")["metadata"]["labels"] == {"by": "edit"}
