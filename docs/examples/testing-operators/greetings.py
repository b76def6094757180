"""The Greeting kind for kr8s, and what the tests of both example operators share: put its
CRD in place, and wait (watching, not polling) until a Greeting is greeted."""

import asyncio
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
    """The greeting of the Greeting `name`, as soon as an operator wrote it."""
    async with asyncio.timeout(within):
        async for _, greeting in api.watch("greetings.example.com", namespace="default"):
            if greeting.name == name and GREETED in greeting.annotations:
                return str(greeting.annotations[GREETED])
    raise AssertionError(f"the watch of greetings ended before {name} was greeted")
