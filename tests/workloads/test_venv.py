"""`activation`: what activating the engine's virtual environment would change in a child's
environment (tests/cli/test_cli_up_venv.py runs a real `up` from one)."""

from __future__ import annotations

import os

from setpoint.runtime.venv import activation

VENV = "/home/u/project/.venv"
BASE = "/usr"


def test_outside_a_virtual_environment_nothing_changes() -> None:
    assert activation({"PATH": "/usr/bin:/bin"}, prefix=BASE, base_prefix=BASE) == {}


def test_a_virtual_environment_not_activated_goes_first_on_path() -> None:
    got = activation({"PATH": "/usr/bin:/bin"}, prefix=VENV, base_prefix=BASE)
    assert got == {"PATH": f"{VENV}/bin:/usr/bin:/bin", "VIRTUAL_ENV": VENV}


def test_a_virtual_environment_already_first_on_path_leaves_it_as_it_is() -> None:
    environ = {"PATH": f"{VENV}/bin/:/usr/bin", "VIRTUAL_ENV": VENV}  # as `activate` spells it
    got = activation(environ, prefix=VENV, base_prefix=BASE)
    assert got == {"PATH": f"{VENV}/bin/:/usr/bin", "VIRTUAL_ENV": VENV}


def test_a_virtual_environment_later_on_path_goes_first_as_activation_would_put_it() -> None:
    got = activation({"PATH": f"/usr/bin:{VENV}/bin"}, prefix=VENV, base_prefix=BASE)
    assert got["PATH"] == f"{VENV}/bin:/usr/bin:{VENV}/bin"


def test_an_unset_path_becomes_the_environment_then_the_default_search_path() -> None:
    got = activation({}, prefix=VENV, base_prefix=BASE)
    assert got["PATH"] == f"{VENV}/bin{os.pathsep}{os.defpath}"
