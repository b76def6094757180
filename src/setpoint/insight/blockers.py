"""The root-blocker walk: from an object that waits, along what holds it back (the
dependencies it waits for, the objects it owns that are not Ready), to the objects at the
ends of those chains, each with the chain it travelled.

One function, `root_blockers`, used by `setpoint explain` (over a timeline's edges and
conditions, `setpoint.insight.ranking`) and by the live view's detail line (over the
objects as last read, `setpoint.cli.status_table`): each says what "holds back" means for
its data, the walk is the same.

Pure: no I/O, no clock, no model; nodes are any hashable values.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def root_blockers(
    start: N,
    held_back_by: Callable[[N], Sequence[N]],
    is_end: Callable[[N], bool],
) -> list[list[N]]:
    """The chains from `start` to each root blocker, depth first in `held_back_by`'s order:
    each chain is `[start, ..., root]`.

    A root blocker is an object on a chain that is held back by nothing (`held_back_by`
    returns nothing), or where the walk must end (`is_end`: it failed, or does not exist),
    or that closes a cycle (it is already on its chain). An object reached again along
    another chain is not walked twice (nor named twice). `start` itself is never its own
    blocker: when nothing holds it back the list is empty."""
    chains: list[list[N]] = []
    visited: set[N] = {start}

    def walk(chain: list[N]) -> None:
        node = chain[-1]
        if len(chain) > 1 and is_end(node):
            chains.append(chain)
            return
        nexts = list(held_back_by(node))
        if not nexts and len(chain) > 1:
            chains.append(chain)
            return
        for step in nexts:
            if step in chain:
                chains.append([*chain, step])  # a cycle: it ends where it closes
            elif step not in visited:
                visited.add(step)
                walk([*chain, step])

    walk([start])
    return chains
