"""Where the CLI's store is: `.setpoint/state.db` in the nearest of the current directory
and its parents that has a `.setpoint/` directory, as git finds `.git`, unless --store or
SETPOINT_STORE names one (see `setpoint.cli.context`, which re-exports these names).

Kept apart so that `setpoint --help` can name the default without importing the store;
paths are strings (`os.path`: pathlib costs a command's start more than it saves here).
Reads only whether directories exist; no printing.
"""

from __future__ import annotations

import os

STORE_DIR = ".setpoint"
STORE_FILE = "state.db"
DEFAULT_STORE = f"sqlite:///{STORE_DIR}/{STORE_FILE}"
"""The store when neither --store nor SETPOINT_STORE says otherwise and no `.setpoint/`
is found in the current directory or a parent (relative to the cwd)."""


def find_store(start: str) -> tuple[str | None, tuple[str, ...]]:
    """The URL of the store in `.setpoint/` of the absolute directory `start` or its nearest
    parent (None if no directory has one), and the directories searched, nearest first."""
    searched: list[str] = []
    directory = start
    while True:
        searched.append(directory)
        if os.path.isdir(os.path.join(directory, STORE_DIR)):
            return f"sqlite:///{os.path.join(directory, STORE_DIR, STORE_FILE)}", tuple(searched)
        parent = os.path.dirname(directory)
        if parent == directory:
            return None, tuple(searched)
        directory = parent


def store_url_for(given: str | None, start: str) -> tuple[str, tuple[str, ...]]:
    """The store to use: `given` (from --store or SETPOINT_STORE) if any, else the one
    `find_store` finds, else `DEFAULT_STORE`; and where it was looked for (empty when
    `given` or found)."""
    if given:
        return given, ()
    found, searched = find_store(start)
    return (found, ()) if found else (DEFAULT_STORE, searched)
