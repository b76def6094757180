"""An operator written with kr8s: it greets each Greeting, in an annotation."""

import kr8s.asyncio

GREETED = "example.com/greeting"


async def run(api: kr8s.asyncio.Api) -> None:
    """Greet every Greeting not greeted yet, until cancelled."""
    async for event, greeting in api.watch("greetings.example.com", namespace="default"):
        if event != "DELETED" and GREETED not in greeting.annotations:
            await greeting.annotate({GREETED: f"Hello, {greeting.spec['name']}!"})
