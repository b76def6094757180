"""The `setpoint` command line: kubectl-like verbs over a store.

`main.py` parses arguments and turns every error into one line on stderr; each
verb group has its own thin module (`apply.py`, `get.py`, `delete.py`,
`describe.py`, `events.py`);
`load.py` reads manifests and kind modules, `render.py` prints objects, and
`context.py` holds what every verb shares. `apply.apply_object` is the
create-or-update that later writers of desired state can reuse.
"""
