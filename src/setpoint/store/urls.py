"""How a store URL is shown in a message: never with its password.

`shown_url` masks a password in a URL's user part (`postgresql://app:***@host/db`) or in a
`password=` option, in a URL or in any text that holds one (a driver's error message
echoes the URL it could not parse). Pure: no I/O.
"""

from __future__ import annotations

import re

_PASSWORD = re.compile(r"(?P<user>://[^/@\s:]*:)[^@/\s]*(?=@)|(?P<option>\bpassword=)[^&\s]*")


def shown_url(text: str) -> str:
    """`text` (a store URL, or a message that holds one) as a message may show it: a
    password becomes `***` (`postgresql://app:***@host/db`, `?password=***`)."""
    return _PASSWORD.sub(lambda m: (m.group("user") or m.group("option")) + "***", text)
