"""Well-known names are defined once: no module of setpoint but `setpoint.model.wellknown`
spells an annotation, label or finalizer name of ours (`setpoint.dev/...` other than an
apiVersion), so two layers cannot drift apart on one."""

from __future__ import annotations

import re
from pathlib import Path

import setpoint
from setpoint.model import wellknown

SRC = Path(setpoint.__file__).parent
NAME = re.compile(r"""["'](?:[a-z0-9-]+\.)*setpoint\.dev/(?!v\d)[A-Za-z0-9._-]+["']""")


def test_only_the_wellknown_module_spells_our_names() -> None:
    spelled = [
        f"{path.relative_to(SRC)}: {match.group()}"
        for path in sorted(SRC.rglob("*.py"))
        if path != Path(wellknown.__file__)
        for match in NAME.finditer(path.read_text())
    ]
    assert spelled == []


def test_every_name_is_exported_and_distinct() -> None:
    names = [getattr(wellknown, n) for n in wellknown.__all__ if n.isupper()]
    assert len(set(names)) == len(names)
    assert all("/" in n for n in names)


def test_a_child_and_its_log_are_named_after_namespace_and_name() -> None:
    assert wellknown.child_name("", "db") == "default_db"
    assert wellknown.child_log_file("shop", "web-0") == "shop_web-0.log"
