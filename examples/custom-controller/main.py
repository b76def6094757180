"""Run the ManagedFile controller until Ctrl-C (SIGINT) or SIGTERM, then stop cleanly (exit 0).

    ./dev run python examples/custom-controller/main.py [--store URL] [--resync S] [--poll S]

The store defaults to the CLI's (`$SETPOINT_STORE`, else sqlite:///.setpoint/state.db
in the current directory), so `setpoint apply` in another terminal reaches this
controller. Logs go to stderr: one line per reconcile (the runtime's
`controller=... key=... result=...`), and one per change made to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

import managedfile  # beside this file: Python puts a script's directory on sys.path

from setpoint import Error, Manager, ManagerOptions, Registry, open_store


async def run(args: argparse.Namespace) -> None:
    registry = Registry()
    managedfile.register(registry)
    store = await open_store(args.store, registry)
    try:
        manager = Manager(store, options=ManagerOptions(handle_signals=True, grace_period=10.0))
        managedfile.setup(manager, resync_every=args.resync, poll_every=args.poll)
        await manager.run()
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the ManagedFile controller.")
    parser.add_argument(
        "--store",
        metavar="URL",
        default=os.environ.get("SETPOINT_STORE") or "sqlite:///.setpoint/state.db",
        help="the store to watch (default: $SETPOINT_STORE, else sqlite:///.setpoint/state.db)",
    )
    parser.add_argument(
        "--resync", type=float, default=30.0, metavar="S", help="check every file every S seconds"
    )
    parser.add_argument(
        "--poll", type=float, default=0.5, metavar="S", help="stat managed files every S seconds"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    try:
        asyncio.run(run(args))
    except Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before the manager took over the signal
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
