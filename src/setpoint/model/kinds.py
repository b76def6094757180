"""Kinds and their registry: which (apiVersion, kind) pairs exist and how their spec and
status validate.

A `Kind` is a value: defining one registers nothing. A `Registry` holds the kinds one store
(and the CLI, and an engine) knows, and is filled only by explicit calls. User code defines
and registers kinds exactly as the built-in ones are::

    class GreetingSpec(Schema):
        message: str
        repeat: int = 1

    GREETING = Kind("example.com/v1", "Greeting", spec=GreetingSpec)

    def register(registry: Registry) -> None:
        registry.register(GREETING)

Each package of built-in kinds has such a `register` function (`setpoint.runtime`,
`setpoint.workloads`, `setpoint.control`); there is no process-wide registry.

A kind whose objects depend on others names the field that lists them in `depends_on`
(Process, Job and Deployment: `spec.dependsOn`); the store then refuses a write that closes
a dependency cycle (`setpoint.model.dependency_graph`).

A kind's `spec`, `status` and `body` are `Schema` models (`setpoint.model.schema`, the
one module of the model that imports pydantic, imported on the first validation). They
may be given as the class, or as a `"module:Name"` reference imported on first use, so
that defining and naming kinds costs no pydantic: the built-in kinds do that, and `setpoint
get` never builds a model.

A kind defined as data (a `CustomResourceDefinition` in the store, `setpoint.model.crd`)
has no models: its `validator` checks and defaults everything but metadata by the CRD's
`openAPIV3Schema`. The registry keeps such kinds apart from those registered in Python:
`define` adds or replaces one (a Python kind of the same apiVersion and kind wins),
`forget` drops one, and `refresh`, when set (by the store), is called once on a lookup
that misses so that a kind another process defined meanwhile is found. Pure: no I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from setpoint.errors import Invalid, UnknownKind
from setpoint.model.admission import check_values, refuse_unknown_fields
from setpoint.model.meta import Object, check_metadata

if TYPE_CHECKING:
    from pydantic import BaseModel

SchemaRef: TypeAlias = "type[BaseModel] | str"
"""A kind's spec, status or body schema: a model class, or `"module:Name"`, the name of
one imported on first validation (`setpoint.model.schema.model_of`)."""

_SCHEMA_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class ScaleSubresource:
    """Where a kind keeps what its scale subresource reads and writes (as a CRD's
    `subresources.scale`): dotted paths to the desired replicas in the spec, the observed
    replicas in the status, and the label selector (a string) in the status."""

    spec_replicas_path: str = "spec.replicas"
    status_replicas_path: str = "status.replicas"
    label_selector_path: str | None = "status.selector"


@dataclass(frozen=True)
class PrinterColumn:
    """A column `setpoint get` shows for a kind, after READY (as a CRD's
    `additionalPrinterColumns`): its header, the dotted path of the value, and a format
    spec for numbers (e.g. `.1f`)."""

    name: str
    path: str
    number_format: str = ""

    def value(self, obj: Object) -> str:
        """The cell: the value at `path`, or `-` when there is none."""
        node: Any = obj
        for part in self.path.split("."):
            if not isinstance(node, dict):
                return "-"
            node = node.get(part)
        if node is None or node == "":
            return "-"
        if self.number_format and isinstance(node, int | float) and not isinstance(node, bool):
            return format(node, self.number_format)
        return str(node)


class KindValidator(Protocol):
    """How a kind without models validates (a CRD's schema, `setpoint.model.crd`): in place,
    with defaults filled, raising `Invalid` naming the field. Compared by value, so two
    kinds built from one definition are equal."""

    def validate(self, obj: Object) -> None:
        """Every top-level field but `metadata` (which `Kind.validate` checks)."""

    def validate_status(self, status: Any) -> Any:
        """The status alone (not None); return it as it is to be stored."""


@dataclass(frozen=True)
class Kind:
    """One kind: its names, scope and schemas. `plural` defaults to the lowercased kind plus
    "s"; `api_version` is `group/version` (or `v1`, the core group)."""

    api_version: str
    kind: str
    plural: str = ""
    namespaced: bool = True
    spec: SchemaRef | None = None
    status: SchemaRef | None = None
    short_names: tuple[str, ...] = ()
    body: SchemaRef | None = None
    """Schema of the top-level fields of a kind with no spec (like Event): every field but
    apiVersion, kind, metadata and status."""
    scale: ScaleSubresource | None = None
    """The scale subresource (`setpoint scale`, autoscalers), if the kind has one."""
    columns: tuple[PrinterColumn, ...] = ()
    """Extra columns of `setpoint get`."""
    secret_fields: tuple[str, ...] = ()
    """Top-level fields whose values are secret (a Secret's `data`): the timeline records
    only which keys changed, `describe` shows keys and sizes, and the values are masked
    wherever a child's output is quoted (`setpoint.model.redaction`)."""
    validator: KindValidator | None = None
    """Validation of a kind with no models (defined by a CRD): used instead of `spec`,
    `status` and `body`."""
    status_subresource: bool = False
    """A kind with no models whose CRD declares the status subresource (`subresources:
    {status: {}}`). A kind with a `status` schema always has it (`has_status`)."""
    depends_on: str | None = None
    """The dotted path of the field listing what an object of this kind depends on
    (`spec.dependsOn`; a field written with the object, not by a status write):
    references `{kind, name, namespace}`, edges of the dependency graph in which the store
    refuses a write that closes a cycle (`setpoint.model.dependency_graph`)."""
    status_on_create: bool = False
    """A create that carries no status gets the status schema's defaults (a Pod starts
    `Pending`, as kube-apiserver creates it); otherwise a new object has no status."""

    def __post_init__(self) -> None:
        if "/" not in self.api_version and self.api_version != "v1":
            raise Invalid(
                f"{self.api_version!r}: want group/version, e.g. example.com/v1",
                field="apiVersion",
            )
        if not self.plural:
            object.__setattr__(self, "plural", self.kind.lower() + "s")
        object.__setattr__(self, "short_names", tuple(self.short_names))
        object.__setattr__(self, "columns", tuple(self.columns))
        if self.depends_on is not None and not _DOTTED.fullmatch(self.depends_on):
            raise Invalid(f"{self.depends_on!r}: want a dotted field path", field="depends_on")
        for name in ("spec", "status", "body"):
            ref = getattr(self, name)
            if isinstance(ref, str) and not _SCHEMA_REF.fullmatch(ref):
                raise Invalid(f"{ref!r}: want a model class or 'module:Name'", field=name)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def has_status(self) -> bool:
        """Whether the kind serves the status subresource (`.../NAME/status`)."""
        return self.status is not None or self.status_subresource

    def validate(self, obj: Object) -> None:
        """Check values and field names, metadata, then spec and status, in place; raise
        `Invalid` naming the field (an unknown one with the nearest valid name). Top-level
        fields are checked for kinds with a spec (apiVersion, kind, metadata, spec, status)
        or a body schema; a kind with neither keeps any top-level field.

        Spec and status are replaced by their normalised form (defaults filled,
        camelCase keys), so what is stored is what the schema means.
        """
        check_values(obj)
        if self.validator is not None:
            check_metadata(obj, namespaced=self.namespaced)
            self.validator.validate(obj)
            return
        from setpoint.model.schema import model_of, validated

        if self.spec is not None:  # a kind with neither spec nor body schema takes any field
            refuse_unknown_fields(obj, _TOP_LEVEL)
        check_metadata(obj, namespaced=self.namespaced)
        if self.body is not None:
            fields = {k: v for k, v in obj.items() if k not in _ENVELOPE}
            for k in fields:
                del obj[k]
            obj.update(validated(model_of(self.body), fields, ""))
        if self.spec is not None:
            obj["spec"] = validated(model_of(self.spec), obj.get("spec"), "spec")
        if self.status is not None and obj.get("status") is not None:
            obj["status"] = validated(model_of(self.status), obj.get("status"), "status")

    def validate_status(self, status: Any) -> Any:
        if status is None:
            return status
        if self.validator is not None:
            check_values(status, "status")
            return self.validator.validate_status(status)
        from setpoint.model.schema import model_of, validated

        if self.status is None:
            return status
        check_values(status, "status")
        return validated(model_of(self.status), status, "status")


_ENVELOPE = ("apiVersion", "kind", "metadata", "status")
_TOP_LEVEL = (*_ENVELOPE, "spec")


@dataclass
class Registry:
    """Kinds by (apiVersion, kind), and by every name the CLI accepts for them."""

    _kinds: dict[tuple[str, str], Kind] = field(default_factory=dict)
    _defined: set[tuple[str, str]] = field(default_factory=set)
    """The keys of `_kinds` defined as data (`define`), not registered in Python."""
    _by_name: dict[str, list[Kind]] = field(default_factory=dict, compare=False, repr=False)
    """What `_matches` answered for each name, until the kinds change."""
    changes: int = field(default=0, compare=False)
    """How many times the kinds changed (`register`, `define`, `forget`): a cache of
    something computed from the kinds is current while this has not moved."""
    refresh: Callable[[], None] | None = None
    """Called once by a lookup that misses, before it raises `UnknownKind`: the store
    sets it to re-learn the kinds its CRDs define (`setpoint.store.kinds`)."""

    def register(self, kind: Kind) -> Kind:
        """Add `kind`; return it. Registering the same definition twice is harmless; a
        different one under the same (apiVersion, kind) is refused. A kind registered in
        Python takes the place of one defined as data."""
        key = (kind.api_version, kind.kind)
        existing = self._kinds.get(key)
        if existing is not None and existing != kind and key not in self._defined:
            raise Invalid(f"{kind.kind} in {kind.api_version} is already registered differently")
        self._kinds[key] = kind
        self._defined.discard(key)
        self._changed()
        return kind

    def define(self, kind: Kind) -> bool:
        """Add or replace a kind defined as data (by a CRD); whether the registry now
        knows it. A kind registered in Python under the same (apiVersion, kind) stays, and
        the definition is ignored (False)."""
        key = (kind.api_version, kind.kind)
        if key in self._kinds and key not in self._defined:
            return False
        self._kinds[key] = kind
        self._defined.add(key)
        self._changed()
        return True

    def forget(self, api_version: str, kind: str) -> None:
        """Drop a kind defined as data (a kind registered in Python stays)."""
        if (api_version, kind) in self._defined:
            del self._kinds[(api_version, kind)]
            self._defined.discard((api_version, kind))
            self._changed()

    def _changed(self) -> None:
        self._by_name.clear()
        self.changes += 1

    def registered(self, api_version: str, kind: str) -> bool:
        """Whether a kind registered in Python has this apiVersion and kind (no refresh)."""
        key = (api_version, kind)
        return key in self._kinds and key not in self._defined

    def defined(self) -> list[Kind]:
        """The kinds defined as data, as `define` left them."""
        return [self._kinds[key] for key in sorted(self._defined)]

    def get(self, api_version: str, kind: str) -> Kind:
        found = self._kinds.get((api_version, kind))
        if found is None and self.refresh is not None:
            self.refresh()
            found = self._kinds.get((api_version, kind))
        if found is None:
            raise UnknownKind(f'no kind "{kind}" is registered in version "{api_version}"')
        return found

    def for_object(self, obj: Object) -> Kind:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not api_version:
            raise Invalid("required", field="apiVersion")
        if not isinstance(kind, str) or not kind:
            raise Invalid("required", field="kind")
        return self.get(api_version, kind)

    def for_resource(self, api_version: str, plural: str) -> Kind | None:
        """The kind served at `api_version`'s resource `plural`, if any (no refresh)."""
        for kind in self._kinds.values():
            if kind.plural == plural and kind.api_version == api_version:
                return kind
        return None

    def resolve(self, name: str, *, refresh: bool = True) -> Kind:
        """Find a kind by what a person types: `Process`, `process`, `processes`, `proc`,
        optionally qualified by group (`processes.setpoint.dev`). Without `refresh`, a miss
        raises at once (no `refresh` call)."""
        matches = self._matches(name)
        if not matches and refresh and self.refresh is not None:
            self.refresh()
            matches = self._matches(name)
        if not matches:
            raise UnknownKind(f'the server doesn\'t have a resource type "{name}"')
        if len(matches) > 1:
            options = ", ".join(f"{k.plural}.{k.group}" for k in matches)
            raise Invalid(f'"{name}" is ambiguous: say one of {options}')
        return matches[0]

    def _matches(self, name: str) -> list[Kind]:
        found = self._by_name.get(name)
        if found is None:
            if len(self._by_name) >= 1024:  # names come from clients: keep it bounded
                self._by_name.clear()
            wanted, _, group = name.partition(".")
            wanted = wanted.lower()
            found = self._by_name[name] = [
                k
                for k in self._kinds.values()
                if wanted in (k.singular, k.plural, *k.short_names)
                and (not group or k.group == group)
            ]
        return found

    def __iter__(self) -> Iterator[Kind]:
        return iter(sorted(self._kinds.values(), key=lambda k: (k.group, k.kind)))
