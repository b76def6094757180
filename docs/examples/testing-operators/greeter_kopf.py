"""The same operator, written with kopf: it greets each Greeting, in an annotation."""

import kopf


@kopf.on.create("example.com", "v1", "greetings")
def greet(spec: kopf.Spec, patch: kopf.Patch, **_: object) -> None:
    patch.metadata.annotations["example.com/greeting"] = f"Hello, {spec['name']}!"
