"""Counting what a store wrote: the writes after a revision, Events left out (an Event
is aggregated, not a change of the world), so a test can say "nothing was written"."""

from __future__ import annotations

from setpoint.runtime.events import EVENT
from setpoint.store import Store


async def writes_since(store: Store, since: int) -> list[str]:
    """Every write after revision `since` up to now, but Events: `Kind/name@revision`
    with the status conditions it left, so a failure shows what flipped."""
    until = await store.revision()
    writes: list[str] = []
    if until <= since:
        return writes
    async for change in store.watch(None, None, since=since):
        obj = change.object
        if (obj.get("apiVersion"), obj.get("kind")) != (EVENT.api_version, EVENT.kind):
            conditions = [
                f"{c.get('type')}={c.get('status')}"
                for c in (obj.get("status") or {}).get("conditions") or []
            ]
            name = f"{obj.get('kind')}/{obj['metadata']['name']}@{change.revision}"
            writes.append(f"{name} {change.type} {' '.join(conditions)}".rstrip())
        if change.revision >= until:
            break
    return writes
