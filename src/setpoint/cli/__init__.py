"""The `setpoint` command line: kubectl-like verbs over a store.

`main.py` holds the verb table (`VERBS`), parses arguments importing only the chosen
verb's module, and turns every error into one line on stderr; each verb group has its
own thin module (`apply.py`, `get.py`, `delete.py`, `describe.py`, `events.py`,
`completion.py`...); `load.py` reads manifests, `kind_modules.py` kind modules,
`render.py` prints objects (`escaping.py` keeps the terminal safe), and `context.py`
holds what every verb shares (`store_location.py`: where the store is).
`apply.apply_object` is the create-or-update that later writers of desired state can reuse.
"""

import sys

# Linux only (children in process groups, /proc, the store's file locks): one line, not an
# error from deep inside the first verb that touches one of them.
if sys.platform != "linux":
    sys.exit(f"setpoint runs on Linux only (this is {sys.platform})")
