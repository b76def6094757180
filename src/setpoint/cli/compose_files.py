"""Reading process-compose files from disk as process-compose reads them, for
`setpoint.cli.load.read_manifests` and `setpoint convert`.

* `sniff(manifests, source)` says whether what one file parsed to is a process-compose
  project (`True`), a setpoint manifest (`False`), or refuses a docker compose file in one
  line (`Invalid`: setpoint runs process-compose files and its own manifests).
* `default_files(directory)` is the project a directory holds, as process-compose finds
  it: the first of `compose.yml`, `compose.yaml`, `process-compose.yml`,
  `process-compose.yaml` that is a process-compose file, then the first of the same
  names with `.override` that exists; None when there is none (the directory is read as
  manifests).
* `read_project(paths, ...)` reads the files (each interpolated with `.env` of the
  working directory, then the environment, unless it says `disable_env_expansion: true`;
  a project `extends: FILE` read before it, relative to its directory, its processes
  running there unless they say otherwise), merges them in order (later ones override:
  `setpoint.workloads.compose.project.merge`) and translates the result
  (`setpoint.workloads.compose.translate`; `namespaces`: only the processes in any of
  them). It returns the manifests (named after the first file) and the warnings;
  printing them is the caller's.

Every failure is `Invalid` naming the file (or the field). Nothing here touches a store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from setpoint.errors import EnvFileUnavailable, Invalid
from setpoint.model.manifests import Limits, Manifest, parse_manifests
from setpoint.workloads.compose.project import file_kind, interpolate, merge
from setpoint.workloads.env_files import MAX_ENV_FILE_BYTES, parse_env_file

__all__ = ["DEFAULT_FILES", "OVERRIDE_FILES", "default_files", "read_project", "sniff"]

DEFAULT_FILES = ("compose.yml", "compose.yaml", "process-compose.yml", "process-compose.yaml")
"""The names process-compose looks for in a directory, in its order."""
OVERRIDE_FILES = tuple(name.replace(".y", ".override.y") for name in DEFAULT_FILES)
"""The override it merges over the file it found, in its order."""
DOTENV = ".env"
"""The file of variables process-compose reads from its working directory."""

Reader = Callable[[Path], bytes]
"""Reads one file's bytes (its size checked first), or raises `Invalid` naming it."""


def sniff(manifests: Sequence[Manifest], source: str) -> bool:
    """Whether `manifests` (one file, parsed) is a process-compose project (see above)."""
    if len(manifests) != 1:
        return False
    kind = file_kind(manifests[0].obj)
    if kind == "docker-compose":
        raise Invalid(
            f"{source}: a docker compose file (services:): setpoint runs process-compose "
            "files (processes:) and its own manifests (apiVersion, kind), not containers"
        )
    return kind == "process-compose"


def default_files(directory: Path, read: Reader, limits: Limits) -> list[Path] | None:
    """The process-compose files of `directory`, as process-compose finds them (above)."""
    for name in DEFAULT_FILES:
        path = directory / name
        if path.is_file():
            if not sniff(parse_manifests(read(path), str(path), limits=limits), str(path)):
                return None
            overrides = [directory / o for o in OVERRIDE_FILES if (directory / o).is_file()]
            return [path, *overrides[:1]]
    return None


def read_project(
    paths: Sequence[Path],
    read: Reader,
    limits: Limits,
    environ: Mapping[str, str] | None = None,
    namespaces: Sequence[str] = (),
) -> tuple[list[Manifest], list[str]]:
    """The setpoint manifests of the process-compose files `paths`, merged, and the
    warnings (see the module docstring)."""
    from setpoint.workloads.compose.translate import translate  # the kinds' schemas: pydantic

    environ = os.environ if environ is None else environ
    dotenv = _dotenv(environ)

    def lookup(name: str) -> str | None:  # .env wins, as in process-compose
        return dotenv.get(name, environ.get(name))

    project: dict[str, Any] = {}
    for path in paths:
        for loaded in _load(path, read, limits, lookup, seen=()):
            project = merge(project, loaded)
    source = str(paths[0])
    try:
        translation = translate(
            project,
            dotenv_file=DOTENV if Path(DOTENV).is_file() else None,
            default_shell=(environ.get("COMPOSE_SHELL") or "bash", "-c"),
            project_name=paths[0].name,
            namespaces=namespaces,
        )
    except Invalid as exc:
        raise Invalid(f"{source}: {exc}") from None
    manifests = [Manifest(obj, source, 1) for obj in translation.objects]
    return manifests, [f"{source}: {w}" for w in translation.warnings]


def _load(
    path: Path,
    read: Reader,
    limits: Limits,
    lookup: Callable[[str], str | None],
    seen: tuple[Path, ...],
) -> list[dict[str, Any]]:
    """The project in `path`, interpolated, after the projects it `extends` (each a merge
    step, base first)."""
    raw = read(path)
    parsed = parse_manifests(raw, str(path), limits=limits)
    if not sniff(parsed, str(path)):
        raise Invalid(f"{path}: not a process-compose file (no top-level processes:)")
    project = parsed[0].obj
    if project.get("disable_env_expansion") is not True:
        try:
            text = interpolate(raw.decode("utf-8"), lookup, str(path))
        except UnicodeDecodeError:
            raise Invalid(f"{path}: not a text file (want UTF-8 YAML)") from None
        parsed = parse_manifests(text, str(path), limits=limits)
        if not sniff(parsed, str(path)):
            raise Invalid(f"{path}: not a process-compose file once its variables are set")
        project = parsed[0].obj
    base = project.pop("extends", None)
    if not base:
        return [project]
    if not isinstance(base, str):
        raise Invalid(f"{path}: extends: want the path of a process-compose file")
    extended = Path(os.path.normpath(path.parent / base))
    if extended.resolve() in {p.resolve() for p in (*seen, path)}:
        raise Invalid(f"{path}: extends: {base}: extends itself in a circle")
    parents = _load(extended, read, limits, lookup, (*seen, path))
    directory = str(extended.parent)
    for parent in parents:
        for config in (parent.get("processes") or {}).values():
            if isinstance(config, dict):
                wd = config.get("working_dir")
                if not wd:
                    config["working_dir"] = directory
                elif isinstance(wd, str) and not os.path.isabs(wd):
                    config["working_dir"] = os.path.join(directory, wd)
    return [*parents, project]


def _dotenv(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `.env` in the working directory, if there is one (process-compose
    reads it for interpolation, and every process gets them)."""
    path = Path(DOTENV)
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as exc:
        raise Invalid(f"{DOTENV}: {exc.strerror or exc}") from None
    if len(data) > MAX_ENV_FILE_BYTES:
        raise Invalid(f"{DOTENV}: larger than {MAX_ENV_FILE_BYTES} bytes")
    try:
        return parse_env_file(data.decode("utf-8", "replace"), DOTENV, environ.get)
    except EnvFileUnavailable as exc:
        raise Invalid(str(exc)) from None
