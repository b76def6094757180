"""No import cycle among setpoint's modules: a module never imports itself through others.

A cycle (like the builder importing the manager that imports the builder) makes import
order matter and layers leak; the builder depends on a protocol instead
(`setpoint.runtime.builder.ControllerHost`). Imports under `TYPE_CHECKING` count too.
"""

from __future__ import annotations

import grimp


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("setpoint")
    cycles = set()
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.add(" -> ".join((module, *chain)))
    assert sorted(cycles) == []
