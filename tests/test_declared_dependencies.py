"""What setpoint imports is what it declares: every third-party module `src/setpoint` imports is
a dependency or an extra in pyproject.toml, an extra's modules are imported only by the code
that needs them (the rest runs without them), and no declared dependency pins its own
dependencies exactly (drain3 pinned jsonpickle and cachetools, which clashed with users'
environments)."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "setpoint"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

NEEDS_EXTRA = {
    "setpoint.insight.rca",
    "setpoint.insight.petshop",
    "setpoint.insight.timeline_etcd",
    "setpoint.store.etcd",
    "setpoint.store.etcd_api.etcdserverpb_pb2",
    "setpoint.store.etcd_api.etcdserverpb_pb2_grpc",
    "setpoint.store.etcd_api.mvccpb_pb2",
    "setpoint.store.postgresql",
    "setpoint.testing.fixtures",
}
"""The modules that import an extra's module (numpy, extra `rca`; grpc and google.protobuf,
extra `etcd`, also in the generated modules of setpoint.store.etcd_api; psycopg, extra
`postgresql`; pytest, extra `testing`) at module level."""

EXACT_PINS_ALLOWED = {("pydantic", "pydantic-core"), ("httpx", "httpcore")}
"""(dependency, its requirement) pins that cannot clash: released together, by one project."""

BLOCK = """
import sys
BLOCKED = set(sys.argv.pop(1).split(","))
class Blocked:
    "Makes the modules BLOCKED unimportable, as in an environment without them."
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocked())
"""
RUN_CLI = BLOCK + "from setpoint.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
IMPORT_ALL = (
    BLOCK
    + """
import importlib, pkgutil, setpoint
for m in pkgutil.walk_packages(setpoint.__path__, "setpoint."):
    try:
        importlib.import_module(m.name)
    except ImportError as exc:
        print(m.name, exc)
"""
)


def normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return normalized(match.group(1))


def declared() -> dict[str, str]:
    """Every declared distribution (normalized name) -> "dependencies" or its extra's name."""
    project = PYPROJECT["project"]
    names = {requirement_name(r): "dependencies" for r in project["dependencies"]}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        names.update({requirement_name(r): extra for r in requirements})
    return names


def imported_top_levels() -> Iterator[tuple[str, Path]]:
    """(top-level module, file) of every absolute import in src/setpoint, TYPE_CHECKING too."""
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                yield name.partition(".")[0], path


def third_party_imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for top, path in imported_top_levels():
        if top not in sys.stdlib_module_names and top not in {"setpoint", "__future__"}:
            found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def modules_of(extra: str) -> set[str]:
    """The top-level modules the distributions of `extra` provide."""
    dists = {requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]}
    return {
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if dists & {normalized(d) for d in owners}
    }


def test_every_imported_third_party_module_is_declared() -> None:
    provided_by = importlib.metadata.packages_distributions()
    names = declared()
    undeclared = []
    for module, files in sorted(third_party_imports().items()):
        dists = {normalized(d) for d in provided_by.get(module, [])}
        if not dists & names.keys():
            where = ", ".join(sorted(files))
            undeclared.append(f"{module} (from {sorted(dists) or 'nothing installed'}: {where})")
    assert not undeclared, "imported but not declared in pyproject.toml: " + "; ".join(undeclared)


def test_the_walk_sees_the_imports_it_must() -> None:
    """The check above is only as good as the walk: it finds known imports, stdlib excluded."""
    found = third_party_imports()
    assert {"pydantic", "yaml", "jsonpointer", "numpy"} <= found.keys()
    assert not {"asyncio", "json", "setpoint"} & found.keys()


def test_without_the_extras_only_the_modules_that_need_them_fail_to_import() -> None:
    blocked = set().union(*(modules_of(e) for e in PYPROJECT["project"]["optional-dependencies"]))
    assert "numpy" in blocked
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, ",".join(sorted(blocked))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    failed = {line.split()[0] for line in result.stdout.splitlines()}
    assert failed == NEEDS_EXTRA, result.stdout


def run_cli_without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, module, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")},
    )


def test_rca_without_numpy_says_how_to_install_it(tmp_path: Path) -> None:
    graph, metrics = tmp_path / "graph.csv", tmp_path / "metrics.csv"
    graph.write_text(",a\na,0\n")
    metrics.write_text("node,a\nmetric,latency\nstatistic,Average\nunix_timestamp,\n1,1.0\n")
    args = ["--graph", str(graph), "--abnormal", str(metrics), "--target", "a"]
    result = run_cli_without("numpy", "rca", *args, "--metric", "latency")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "error: setpoint rca needs numpy: pip install 'setpoint[rca]'\n"


def test_other_verbs_run_without_numpy() -> None:
    result = run_cli_without("numpy", "--store", "memory://", "get", "processes")
    assert (result.returncode, result.stderr) == (0, "No resources found in default namespace.\n")
    assert run_cli_without("numpy", "--help").returncode == 0


def test_no_declared_dependency_pins_its_own_dependencies_exactly() -> None:
    pins = []
    for name, where in sorted(declared().items()):
        for requirement in importlib.metadata.requires(name) or []:
            spec, _, marker = requirement.partition(";")
            if "extra ==" in marker:
                continue  # only with an extra of theirs we do not ask for
            if re.search(r"===?\s*[\w.*]+", spec) and (
                (name, requirement_name(spec)) not in EXACT_PINS_ALLOWED
            ):
                pins.append(f"{name} ({where}) requires {spec.strip()}")
    assert not pins, pins
