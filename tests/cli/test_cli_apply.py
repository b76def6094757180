"""`setpoint apply`: create, configure, unchanged; files, directories, stdin, lists, namespaces."""

from __future__ import annotations

import json

import yaml
from cli_kit import CLI, GREETINGS, greeting


def test_apply_creates_then_reports_unchanged_then_configured(cli: CLI) -> None:
    assert cli.ok("apply", "-f", str(GREETINGS)).lines == [
        "greeting.example.com/hello created",
        "greeting.example.com/bonjour created",
    ]
    assert cli.ok("apply", "-f", str(GREETINGS)).lines == [
        "greeting.example.com/hello unchanged",
        "greeting.example.com/bonjour unchanged",
    ]
    before = cli.ok("get", "greeting", "hello", "-o", "json").json()

    docs = list(yaml.safe_load_all(GREETINGS.read_text()))
    docs[0]["spec"]["repeat"] = 3
    changed = cli.write("changed.yaml", *docs)
    assert cli.ok("apply", "-f", str(changed)).lines == [
        "greeting.example.com/hello configured",
        "greeting.example.com/bonjour unchanged",
    ]

    after = cli.ok("get", "greeting", "hello", "-o", "json").json()
    assert after["spec"] == {"message": "Hello, world!", "repeat": 3}
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])


def test_apply_fills_defaults_so_an_explicit_default_is_unchanged(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", greeting("a"))))
    assert cli.ok("get", "greeting", "a", "-o", "json").json()["spec"]["repeat"] == 1
    again = cli.write("b.yaml", greeting("a", repeat=1))
    assert cli.ok("apply", "-f", str(again)).lines == ["greeting.example.com/a unchanged"]


def test_apply_replaces_labels_and_annotations(cli: CLI) -> None:
    first = greeting("a", labels={"app": "x", "tier": "web"})
    first["metadata"]["annotations"] = {"note": "one"}
    cli.ok("apply", "-f", str(cli.write("a.yaml", first)))

    second = greeting("a", labels={"app": "y"})
    assert cli.ok("apply", "-f", str(cli.write("b.yaml", second))).lines == [
        "greeting.example.com/a configured"
    ]
    meta = cli.ok("get", "greeting", "a", "-o", "json").json()["metadata"]
    assert meta["labels"] == {"app": "y"}
    assert "annotations" not in meta
    assert meta["generation"] == 1  # metadata changes are not spec changes


def test_apply_ignores_server_fields_in_the_manifest(cli: CLI) -> None:
    doc = greeting("a")
    doc["metadata"].update(resourceVersion="999", uid="not-mine", generation=7)
    cli.ok("apply", "-f", str(cli.write("a.yaml", doc)))
    meta = cli.ok("get", "greeting", "a", "-o", "json").json()["metadata"]
    assert meta["uid"] != "not-mine"
    assert meta["generation"] == 1


def test_apply_directory_in_sorted_order_skipping_other_files(cli: CLI) -> None:
    d = cli.directory / "manifests"
    d.mkdir()
    (d / "b.yml").write_text(yaml.safe_dump(greeting("from-yml")))
    (d / "a.yaml").write_text(yaml.safe_dump(greeting("from-yaml")))
    (d / "c.json").write_text(json.dumps(greeting("from-json")))
    (d / "notes.txt").write_text("not a manifest: {")
    assert cli.ok("apply", "-f", str(d)).lines == [
        "greeting.example.com/from-yaml created",
        "greeting.example.com/from-yml created",
        "greeting.example.com/from-json created",
    ]


def test_apply_from_stdin_and_several_files(cli: CLI) -> None:
    text = yaml.safe_dump(greeting("piped"))
    other = cli.write("other.yaml", greeting("filed"))
    assert cli.ok("apply", "-f", "-", "-f", str(other), input=text).lines == [
        "greeting.example.com/piped created",
        "greeting.example.com/filed created",
    ]


def test_apply_unpacks_a_list_and_skips_empty_documents(cli: CLI) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": [greeting("one"), greeting("two")]}
    path = cli.write("list.yaml", "", items, "# only a comment\n")
    assert cli.ok("apply", "-f", str(path)).lines == [
        "greeting.example.com/one created",
        "greeting.example.com/two created",
    ]


def test_apply_namespace_from_flag_or_manifest(cli: CLI) -> None:
    cli.ok("apply", "-n", "team-a", "-f", str(cli.write("a.yaml", greeting("a"))))
    cli.ok("apply", "-f", str(cli.write("b.yaml", greeting("b", namespace="team-b"))))
    rows = [line.split()[:2] for line in cli.ok("get", "greetings", "-A").lines[1:]]
    assert rows == [["team-a", "a"], ["team-b", "b"]]
    assert cli.ok("get", "greetings", "-n", "team-a", "-o", "name").lines == [
        "greeting.example.com/a"
    ]


def test_apply_onto_an_object_being_deleted_is_refused_and_writes_nothing(cli: CLI) -> None:
    """As Kubernetes: what it declares would go with the object, so say so and write nothing
    (under `setpoint up`, a re-apply right after `delete` met a Process still stopping)."""
    kept = greeting("a")
    kept["metadata"]["finalizers"] = ["example.com/keep"]
    manifest = cli.write("a.yaml", kept)
    cli.ok("apply", "-f", str(manifest))
    cli.ok("delete", "greeting", "a")
    before = cli.ok("get", "greeting", "a", "-o", "json").json()
    assert before["metadata"]["deletionTimestamp"]

    kept["spec"]["repeat"] = 5
    result = cli("apply", "-f", str(cli.write("b.yaml", kept)))
    assert result.code == 1
    assert "greeting.example.com/a is being deleted: apply again once it is gone" in result.err
    assert "setpoint wait --for=delete greeting/a" in result.err
    assert cli.ok("get", "greeting", "a", "-o", "json").json() == before
