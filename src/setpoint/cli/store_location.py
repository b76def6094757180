"""Where the CLI's store is: `.setpoint/state.db` in the nearest of the current directory
and its parents that has a `.setpoint/` directory, as git finds `.git`, unless --store or
SETPOINT_STORE names one (see `setpoint.cli.context`, which re-exports these names).

Kept apart so that `setpoint --help` can name the default without importing the store.
Reads only whether directories exist; no printing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from pathlib import Path

STORE_DIR = ".setpoint"
STORE_FILE = "state.db"
DEFAULT_STORE = f"sqlite:///{STORE_DIR}/{STORE_FILE}"
"""The store when neither --store nor SETPOINT_STORE says otherwise and no `.setpoint/`
is found in the current directory or a parent (relative to the cwd)."""


def find_store(start: Path) -> tuple[str | None, tuple[Path, ...]]:
    """The URL of the store in `.setpoint/` of `start` or its nearest parent (None if no
    directory has one), and the directories searched, nearest first."""
    searched: list[Path] = []
    for directory in (start, *start.parents):
        searched.append(directory)
        if (directory / STORE_DIR).is_dir():
            return f"sqlite:///{directory / STORE_DIR / STORE_FILE}", tuple(searched)
    return None, tuple(searched)


def store_url_for(given: str | None, start: Path) -> tuple[str, tuple[Path, ...]]:
    """The store to use: `given` (from --store or SETPOINT_STORE) if any, else the one
    `find_store` finds, else `DEFAULT_STORE`; and where it was looked for (empty when
    `given` or found)."""
    if given:
        return given, ()
    found, searched = find_store(start)
    return (found, ()) if found else (DEFAULT_STORE, searched)
