"""The Greeting kind for kr8s, and what the tests of both example operators share: put its
CRD in place, and wait (watching, not polling) until a Greeting is greeted."""

import asyncio
import contextlib
from pathlib import Path

import kr8s.asyncio
import yaml
from kr8s.asyncio.objects import CustomResourceDefinition, new_class

Greeting = new_class(kind="Greeting", version="example.com/v1", namespaced=True, plural="greetings")
GREETED = "example.com/greeting"
"""The annotation in which the operators greet."""


async def install_crd(api: kr8s.asyncio.Api) -> None:
    crd = yaml.safe_load((Path(__file__).parent / "greetings.yaml").read_text())
    await CustomResourceDefinition(crd, api=api).create()


async def greeting_of(api: kr8s.asyncio.Api, name: str, *, within: float = 20.0) -> str:
    """The greeting of the Greeting `name`, as soon as an operator wrote it.

    The watch runs in a task that is cancelled once the greeting is seen: cancelling unwinds
    kr8s's stream at once, where leaving the `async for` early would leave it for the garbage
    collector to close, perhaps after the test's event loop is gone."""
    greeted: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def watch() -> None:
        async for _, greeting in api.watch("greetings.example.com", namespace="default"):
            if greeting.name == name and GREETED in greeting.annotations and not greeted.done():
                greeted.set_result(str(greeting.annotations[GREETED]))

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait([greeted, watcher], timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher  # re-raises what ended the watch, if anything did
    if not greeted.done():
        raise AssertionError(f"{name} was not greeted within {within} s")
    return greeted.result()
