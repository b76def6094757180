"""A steady request loop against the web Service, to watch a rolling update drop nothing.

    python3 examples/webapp/load.py [--url http://127.0.0.1:18080/] [--until FILE]
                                    [--seconds 60] [--requests 100000]

Sends GET requests one after another, each on a new connection (as a load balancer's
clients would), until FILE exists, or for `--seconds`, or `--requests` are sent, whichever
comes first. Then prints one JSON line: requests sent, failures (no answer or a status
other than 200) with the first few reasons, and how many answers each app version gave.
Only loopback URLs are accepted: this is a local example.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

_VERSION = re.compile(r"\(version ([^)]*)\)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:18080/")
    parser.add_argument("--until", type=Path, help="stop once this file exists")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        print(f"load: {args.url}: only loopback addresses", file=sys.stderr)
        return 2
    versions: collections.Counter[str] = collections.Counter()
    reasons: list[str] = []
    sent = failures = 0
    deadline = time.monotonic() + args.seconds
    while sent < args.requests and time.monotonic() < deadline:
        if args.until is not None and args.until.exists():
            break
        sent += 1
        try:
            with urllib.request.urlopen(args.url, timeout=10) as response:
                body = response.read().decode(errors="replace")
            match = _VERSION.search(body)
            versions[match.group(1) if match else "?"] += 1
        except (OSError, urllib.error.HTTPError) as exc:
            failures += 1
            if len(reasons) < 5:
                reasons.append(str(exc))
    summary = {"requests": sent, "failures": failures, "reasons": reasons, "versions": versions}
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
