"""Input is admitted or refused as a whole, with one clear line (issue 11), through the real
command line: hostile YAML (alias bombs, deep nesting, huge files), numbers and values a
process cannot use, misspelled and repeated fields, duplicate objects, store URLs, CLI
numbers and names, and control characters in anything printed. Each refusal is one
`error:` line, exit status 1, no traceback, within the kit's timeout, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import CLI, greeting
from test_cli_errors import nothing_stored, one_error

from setpoint.cli.render import escape

PROCESS = "setpoint.dev/v1alpha1"


def process(name: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"args": args}
    if env is not None:
        spec["env"] = env
    return {"apiVersion": PROCESS, "kind": "Process", "metadata": {"name": name}, "spec": spec}


def json_file(cli: CLI, name: str, *docs: object) -> Path:
    """A JSON manifest (one object, or a `kind: List` of several)."""
    doc = docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": list(docs)}
    path = cli.directory / name
    path.write_text(json.dumps(doc))
    return path


def no_processes_stored(cli: CLI) -> bool:
    if not (cli.directory / "state.db").exists():
        return True
    return cli.ok("get", "processes", "-A", "-o", "json").json()["items"] == []


# -- parsing limits ----------------------------------------------------------------------


def alias_bomb(levels: int) -> str:
    """A few hundred bytes of YAML whose aliases expand to 9**levels strings."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [9, 10])
def test_a_yaml_alias_bomb_is_refused_at_once(cli: CLI, levels: int) -> None:
    bomb = alias_bomb(levels)
    assert len(bomb) < 500
    line = one_error(cli("apply", "-f", str(cli.write("bomb.yaml", bomb))))
    assert "aliases expand" in line
    assert "limit" in line


def test_a_recursive_alias_is_refused(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("loop.yaml", "a: &a [*a]\n"))))
    assert "alias" in line


def test_a_huge_manifest_is_refused_before_parsing(cli: CLI) -> None:
    path = cli.directory / "huge.yaml"
    with path.open("w") as f:
        f.write("apiVersion: example.com/v1\nkind: Greeting\nmetadata: {name: a}\n")
        f.write("spec:\n  message: [" + "1, " * (25 * 1024 * 1024) + "1]\n")  # 50 MB
    line = one_error(cli("apply", "-f", str(path)))
    assert "over the limit of 4194304 bytes" in line
    assert nothing_stored(cli)


def test_the_size_limit_can_be_changed(cli: CLI) -> None:
    path = cli.write("a.yaml", greeting("a"))
    line = one_error(cli("apply", "-f", str(path), env={"SETPOINT_MAX_MANIFEST_BYTES": "20"}))
    assert "over the limit of 20 bytes" in line
    cli.ok("apply", "-f", str(path))


def test_deep_json_is_refused_without_a_recursion_error(cli: CLI) -> None:
    path = cli.directory / "deep.json"
    path.write_text("[" * 500 + "]" * 500)
    line = one_error(cli("apply", "-f", str(path)))
    assert "nested more than 100 levels deep" in line


@pytest.mark.parametrize(
    "text",
    [
        "[" * 600 + "]" * 600,
        "a:\n" + "".join("  " * i + "- \n" for i in range(1, 600)),
    ],
    ids=["flow", "block"],
)
def test_deep_yaml_is_refused_without_a_recursion_error(cli: CLI, text: str) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("deep.yaml", text))))
    assert "nested more than 100 levels deep" in line


def test_an_integer_beyond_64_bits_names_the_field_and_writes_nothing(cli: CLI) -> None:
    path = cli.write(
        "big.yaml",
        greeting("fine"),
        "apiVersion: example.com/v1\nkind: Greeting\nmetadata: {name: big}\n"
        "spec:\n  message: hi\n  repeat: 99999999999999999999999\n",
    )
    line = one_error(cli("apply", "-f", str(path)))
    assert "spec.repeat" in line
    assert "64 bits" in line
    assert nothing_stored(cli)  # not even the first document


def test_a_job_backoff_limit_beyond_64_bits(cli: CLI) -> None:
    job = {
        "apiVersion": PROCESS,
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"args": ["true"], "backoffLimit": 99999999999999999999999},
    }
    line = one_error(cli("apply", "-f", str(json_file(cli, "job.json", job))))
    assert "spec.backoffLimit" in line


# -- field names -------------------------------------------------------------------------


def test_a_misspelled_top_level_field_is_refused_with_a_suggestion(cli: CLI) -> None:
    doc = greeting("a")
    doc["sepc"] = doc.pop("spec")
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", doc))))
    assert "sepc: unknown field" in line
    assert 'did you mean "spec"?' in line
    assert nothing_stored(cli)


def test_a_misspelled_metadata_field_is_refused_with_a_suggestion(cli: CLI) -> None:
    doc = greeting("a")
    doc["metadata"]["lables"] = {"app": "x"}
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", doc))))
    assert "metadata.lables: unknown field" in line
    assert 'did you mean "labels"?' in line
    assert nothing_stored(cli)


def test_a_misspelled_spec_field_gets_a_suggestion(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", greeting("a", repaet=2)))))
    assert 'spec.repaet: unknown field; did you mean "repeat"?' in line


def test_a_repeated_key_in_one_mapping_is_refused(cli: CLI) -> None:
    text = "apiVersion: example.com/v1\nkind: Greeting\nmetadata:\n  name: a\n  name: b\n"
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", text + "spec: {message: hi}\n"))))
    assert "a.yaml:5" in line
    assert "duplicate key 'name'" in line
    assert nothing_stored(cli)


def test_a_repeated_key_in_json_is_refused(cli: CLI) -> None:
    path = cli.directory / "a.json"
    path.write_text('{"apiVersion": "example.com/v1", "kind": "Greeting", "kind": "Greeting"}')
    assert "duplicate key 'kind'" in one_error(cli("apply", "-f", str(path)))


# -- duplicates --------------------------------------------------------------------------


def test_one_object_twice_in_a_file_is_refused(cli: CLI) -> None:
    path = cli.write("twice.yaml", greeting("a"), greeting("b"), greeting("a", "again"))
    line = one_error(cli("apply", "-f", str(path)))
    assert "Greeting/default/a is declared twice" in line
    assert nothing_stored(cli)


def test_one_object_in_two_files_of_a_directory_is_refused(cli: CLI) -> None:
    directory = cli.directory / "manifests"
    directory.mkdir()
    (directory / "one.yaml").write_text(json.dumps(greeting("a")))
    (directory / "two.json").write_text(json.dumps(greeting("a", "other")))
    line = one_error(cli("apply", "-f", str(directory)))
    assert "declared twice" in line
    assert "one.yaml" in line
    assert nothing_stored(cli)


def test_the_same_name_in_two_namespaces_is_fine(cli: CLI) -> None:
    path = cli.write("ns.yaml", greeting("a", namespace="one"), greeting("a", namespace="two"))
    cli.ok("apply", "-f", str(path))


# -- values a process cannot use ---------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (process("p", ["echo"], {"A=B": "x"}), 'spec.env["A=B"]'),
        (process("p", ["echo"], {"": "x"}), 'spec.env[""]'),
        (process("p", ["echo", "a\0b"]), "spec.args[1]"),
        (process("p", ["echo"], {"A": "x\0y"}), "spec.env.A"),
    ],
    ids=["equals-in-env-name", "empty-env-name", "nul-in-args", "nul-in-env-value"],
)
def test_values_a_process_cannot_use_are_refused_at_admission(
    cli: CLI, doc: dict[str, object], field: str
) -> None:
    path = json_file(cli, "p.json", process("fine", ["true"]), doc)
    line = one_error(cli("apply", "-f", str(path)))
    assert field in line
    assert no_processes_stored(cli)


# -- a write that fails midway -----------------------------------------------------------

FLAKY_KINDS = """
from pydantic import model_validator
from setpoint import Kind, Registry, Schema

CHECKS = {"count": 0}


class FlakySpec(Schema):
    fail_after: int | None = None

    @model_validator(mode="after")
    def _flaky(self) -> "FlakySpec":
        # Admission checks every object once; the write path checks again: an object with
        # failAfter: 1 passes admission and is refused when it is written.
        if self.fail_after is not None:
            CHECKS["count"] += 1
            if CHECKS["count"] > self.fail_after:
                raise ValueError("refused while writing")
        return self


def register(registry: Registry) -> None:
    registry.register(Kind("example.com/v1", "Flaky", spec=FlakySpec))
"""


def test_a_write_that_fails_midway_says_what_was_applied(cli: CLI) -> None:
    kinds = cli.directory / "flaky.py"
    kinds.write_text(FLAKY_KINDS)

    def flaky(name: str, **spec: int) -> dict[str, object]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Flaky",
            "metadata": {"name": name},
            "spec": spec,
        }

    path = cli.write("f.yaml", flaky("a"), flaky("b", failAfter=1), flaky("c"))
    result = cli("--kinds", str(kinds), "apply", "-f", str(path))
    line = one_error(result)
    assert "flaky.example.com/b" in line
    assert "applied before it: flaky.example.com/a" in line
    assert "not applied: flaky.example.com/b, flaky.example.com/c" in line
    assert result.lines == ["flaky.example.com/a created"]
    stored = cli.ok("--kinds", str(kinds), "get", "flaky", "-o", "name").lines
    assert stored == ["flaky.example.com/a"]


# -- store URLs, numbers and names on the command line -----------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [("sqlite:", "want sqlite:///relative/path.db"), ("sqlite:///:memory:", "memory://")],
)
def test_bad_store_urls_are_one_line(cli: CLI, url: str, says: str) -> None:
    line = one_error(cli("--store", url, "get", "greetings", store=False))
    assert says in line


def test_a_huge_timeline_limit_is_one_line(cli: CLI) -> None:
    line = one_error(cli("timeline", "--limit", "9" * 30))
    assert "--limit" in line


def test_logs_never_read_outside_the_log_directory(applied: CLI) -> None:
    (applied.directory / "x_web.log").write_text("SECRET\n")  # logs/../x_web.log
    result = applied("logs", "-n", "../x", "web")
    assert "--namespace" in one_error(result)
    assert "SECRET" not in result.out


def test_logs_do_not_glob_other_objects_logs(applied: CLI) -> None:
    logs = applied.directory / "logs"
    logs.mkdir()
    (logs / "default_a.log.1").write_text("OTHER\n")
    result = applied("logs", "?")
    assert "NAME" in one_error(result)
    assert "OTHER" not in result.out


@pytest.mark.parametrize(
    "args",
    [
        ("get", "greeting", "Not_A_Name"),
        ("describe", "greeting", "a?"),
        ("delete", "greeting", "a..b"),
        ("get", "greeting/x*"),
        ("timeline", "greeting/Bad"),
        ("logs", "web*"),
        ("get", "greetings", "-n", "Bad_Namespace"),
        ("events", "-n", "../x"),
    ],
)
def test_names_and_namespaces_are_checked_on_every_verb(
    applied: CLI, args: tuple[str, ...]
) -> None:
    line = one_error(applied(*args))
    assert "DNS-1123" in line


# -- terminal output ---------------------------------------------------------------------


def test_control_characters_in_objects_are_printed_escaped(cli: CLI) -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Greeting", "name": "a"},
        "reason": "Shown\x1b[31m",
        "message": "\x1b[2J\x1b]0;pwned\x07cleared your screen",
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "test"},
    }
    cli.ok("apply", "-f", str(json_file(cli, "event.json", event)))
    for args in (("events",), ("get", "events", "-o", "wide")):
        out = cli.ok(*args).out
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "\\x1b[2J\\x1b]0;pwned\\x07cleared your screen" in out
        assert "Shown\\x1b[31m" in out


def test_control_characters_in_error_messages_are_escaped(cli: CLI) -> None:
    doc = greeting("a")
    doc["metadata"]["\x1b[31mred"] = "x"
    result = cli("apply", "-f", str(json_file(cli, "esc.json", doc)))
    line = one_error(result)
    assert "\x1b" not in result.err
    assert "\\x1b[31mred" in line


# -- reads never create state ------------------------------------------------------------


def test_a_read_with_no_store_creates_nothing_and_says_where_it_looked(cli: CLI) -> None:
    before = sorted(cli.directory.iterdir())
    line = one_error(cli("get", "greetings", store=False))
    assert "no store found" in line
    assert str(cli.directory) in line
    assert sorted(cli.directory.iterdir()) == before


def test_a_misspelled_store_path_creates_nothing(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", greeting("a"))))
    typo = cli.directory / "stat.db"
    line = one_error(cli("--store", f"sqlite:///{typo}", "get", "greetings", store=False))
    assert f"no store at {typo}" in line
    assert not typo.exists()


def test_the_store_is_found_in_a_parent_directory(cli: CLI) -> None:
    applied = cli("apply", "-f", str(cli.write("a.yaml", greeting("a"))), store=False)
    assert applied.code == 0, applied
    assert (cli.directory / ".setpoint" / "state.db").is_file()
    deeper = cli.directory / "sub" / "deeper"
    deeper.mkdir(parents=True)
    below = CLI(deeper)
    found = below("get", "greetings", "-o", "name", store=False)
    assert (found.code, found.lines) == (0, ["greeting.example.com/a"]), found
    assert not (deeper / ".setpoint").exists()


def test_escape_keeps_tabs_and_newlines_and_shows_every_control_character() -> None:
    assert escape("a\tb\nc") == "a\tb\nc"
    assert escape("\x1b[31m\r\x00\x7f\x9b") == "\\x1b[31m\\x0d\\x00\\x7f\\x9b"
    assert escape("abc\u202edef\u2066") == "abc\\u202edef\\u2066"
    assert escape("héllo ✓") == "héllo ✓"
