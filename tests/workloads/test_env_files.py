"""`envFile` parsing, pure: docker compose's `env_file` format, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.errors import EnvFileUnavailable
from setpoint.workloads.env_files import parse_env_file, read_env_files

COMPOSE_EXAMPLES = r"""
# a comment, then a blank line

PLAIN=VAL
export EXPORTED=yes
  SPACED  =  padded value
QUOTED="VAL"
SINGLE='VAL'
UNQUOTED_COMMENT=VAL # comment
NOT_A_COMMENT=VAL# not a comment
DOUBLE_KEEPS_HASH="VAL # not a comment"
DOUBLE_THEN_COMMENT="VAL" # comment
SINGLE_LITERAL='$OTHER ${OTHER} \t'
OTHER=other
UNQUOTED_REFERENCE=$OTHER-${OTHER}-${UNSET:-default}-${EMPTY_SO_FAR-kept}
DOUBLE_REFERENCE="${OTHER:+set} \${OTHER} $$OTHER ${HOME}"
SINGLE_ESCAPED_QUOTE='Let\'s go!'
DOUBLE_JSON="{\"hello\": \"json\"}"
DOUBLE_ESCAPES="some\tvalue\nnext \\ \$HOME"
UNQUOTED_BACKSLASH=some\tvalue
MULTI="first
second"
EMPTY=
EMPTY_QUOTED=""
dotted.key_1=ok
HOME
NOT_IN_THE_ENGINE
"""


def test_docker_compose_examples() -> None:
    engine = {"HOME": "/home/me", "EMPTY_SO_FAR": ""}
    assert parse_env_file(COMPOSE_EXAMPLES, "e.env", engine.get) == {
        "PLAIN": "VAL",
        "EXPORTED": "yes",
        "SPACED": "padded value",
        "QUOTED": "VAL",
        "SINGLE": "VAL",
        "UNQUOTED_COMMENT": "VAL",
        "NOT_A_COMMENT": "VAL# not a comment",
        "DOUBLE_KEEPS_HASH": "VAL # not a comment",
        "DOUBLE_THEN_COMMENT": "VAL",
        "SINGLE_LITERAL": r"$OTHER ${OTHER} \t",
        "OTHER": "other",
        "UNQUOTED_REFERENCE": "other-other-default-",
        "DOUBLE_REFERENCE": "set ${OTHER} $OTHER /home/me",
        "SINGLE_ESCAPED_QUOTE": "Let's go!",
        "DOUBLE_JSON": '{"hello": "json"}',
        "DOUBLE_ESCAPES": "some\tvalue\nnext \\ $HOME",
        "UNQUOTED_BACKSLASH": r"some\tvalue",
        "MULTI": "first\nsecond",
        "EMPTY": "",
        "EMPTY_QUOTED": "",
        "dotted.key_1": "ok",
        "HOME": "/home/me",
    }


def test_spaces_around_an_unquoted_value_are_dropped() -> None:
    assert parse_env_file("  SPACED  =  padded value   \t\n") == {"SPACED": "padded value"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A=1\nB C=2\n", "envFile e.env:2: 'B C' is not a variable name"),
        ("A=1\n=2\n", "envFile e.env:2: no key before '='"),
        (
            'A=1\n\nB="open\nstill open\n',
            'envFile e.env:3: B: the value opened with " is not closed',
        ),
        ("A='x' y\n", "envFile e.env:1: A: unexpected 'y' after the closing quote"),
        ('A="two\nlines"\nB-C=1\n', "envFile e.env:3: 'B-C' is not a variable name"),
        ("A=${NOPE:?must be set}\n", "envFile e.env:1: A: NOPE must be set"),
        ("A=${NOPE?}\n", "envFile e.env:1: A: NOPE is not set"),
    ],
)
def test_a_malformed_line_is_named(text: str, message: str) -> None:
    with pytest.raises(EnvFileUnavailable) as caught:
        parse_env_file(text, "e.env")
    assert str(caught.value) == message


_KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_VALUES = st.text(
    st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]), max_size=20
)


def _double_quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


@given(st.dictionaries(_KEYS, _VALUES, max_size=6), st.booleans())
def test_double_quoted_values_come_back_as_written(env: dict[str, str], export: bool) -> None:
    prefix = "export " if export else ""
    text = "".join(f"{prefix}{k}={_double_quoted(v)}  # note\n\n" for k, v in env.items())
    assert parse_env_file(text) == env


def test_read_in_order_later_files_win_and_alone_inherits(tmp_path: Path) -> None:
    first, second = tmp_path / "a.env", tmp_path / "b.env"
    first.write_text("A=1\nB=1\nHOME\nUNSET\n")
    second.write_text("B=2\nC=${A}${B}\n")
    env = read_env_files([str(first), str(second)], {"HOME": "/home/me"})
    assert env == {"A": "1", "B": "2", "HOME": "/home/me", "C": "12"}


def test_unreadable_large_or_nul_files_say_so_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.env"
    with pytest.raises(EnvFileUnavailable, match=r"^envFile .*missing.env: No such file"):
        read_env_files([str(missing)], {})
    nul = tmp_path / "nul.env"
    nul.write_bytes(b"A=1\nB=x\0y\n")
    with pytest.raises(EnvFileUnavailable, match=r"nul.env:2: holds a NUL byte$"):
        read_env_files([str(nul)], {})
    big = tmp_path / "big.env"
    big.write_bytes(b"A=" + b"x" * (1024 * 1024) + b"\n")
    with pytest.raises(EnvFileUnavailable, match="larger than"):
        read_env_files([str(big)], {})


def test_bytes_that_are_not_utf8_pass_through(tmp_path: Path) -> None:
    latin = tmp_path / "latin.env"
    latin.write_bytes(b"NAME=caf\xe9\n")
    value = read_env_files([str(latin)], {})["NAME"]
    assert value.encode("utf-8", "surrogateescape") == b"caf\xe9"
