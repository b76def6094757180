"""An operator written with kr8s: it greets each Greeting, in an annotation."""

import contextlib

import kr8s.asyncio

GREETED = "example.com/greeting"


async def run(api: kr8s.asyncio.Api) -> None:
    """Greet every Greeting not greeted yet, until cancelled."""
    watch = api.watch("greetings.example.com", namespace="default")
    async with contextlib.aclosing(watch):
        async for event, greeting in watch:
            if event != "DELETED" and GREETED not in greeting.annotations:
                await greeting.annotate({GREETED: f"Hello, {greeting.spec['name']}!"})
