"""The informer's cache: the last-seen objects of one kind, indexed, read-only to its users.

Objects are held as compact JSON text (about the size of the object itself, far
smaller than nested dicts) and decoded on every read, so a caller can never
change what the cache holds. Indexes map a value to the keys of the objects
that have it: `namespace`, `label` ("key=value"), `owner` (owner uids) and any
index function the user adds. Only the informer writes here. No I/O.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from setpoint.model import Object, Selector, codec

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped kinds."""

IndexFunc = Callable[[Object], Iterable[str]]


def by_namespace(obj: Object) -> Iterable[str]:
    return (obj["metadata"].get("namespace") or "",)


def by_label(obj: Object) -> Iterable[str]:
    return (f"{k}={v}" for k, v in (obj["metadata"].get("labels") or {}).items())


def by_owner(obj: Object) -> Iterable[str]:
    return (ref["uid"] for ref in obj["metadata"].get("ownerReferences") or ())


DEFAULT_INDEXES: Mapping[str, IndexFunc] = {
    "namespace": by_namespace,
    "label": by_label,
    "owner": by_owner,
}


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Cache:
    def __init__(self, indexes: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[Key, bytes] = {}
        self._index_funcs = dict(DEFAULT_INDEXES)
        self._index_funcs.update(indexes or {})
        self._indexes: dict[str, dict[str, set[Key]]] = {n: {} for n in self._index_funcs}
        self.revision = 0
        """The store revision this cache reflects."""

    # -- reads ------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> Object | None:
        data = self._items.get((namespace or "", name))
        return None if data is None else _decode(data)

    def list(
        self, namespace: str | None = None, label_selector: str | Selector | None = None
    ) -> list[Object]:
        selector = Selector.of(label_selector)
        if namespace is None:
            keys: Iterable[Key] = self._items
        else:
            keys = self._indexes["namespace"].get(namespace, ())
        out = []
        for key in sorted(keys):
            obj = _decode(self._items[key])
            if selector.matches(obj["metadata"].get("labels")):
                out.append(obj)
        return out

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        """Objects whose index function `index` yields `value`."""
        if index not in self._indexes:
            raise KeyError(f"no index {index!r}; have {', '.join(sorted(self._indexes))}")
        return [_decode(self._items[k]) for k in sorted(self._indexes[index].get(value, ()))]

    def __iter__(self) -> Iterator[Key]:
        """The keys cached now (a snapshot: the cache may change while you iterate)."""
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # -- writes (the informer's) ------------------------------------------------

    def add_index(self, name: str, func: IndexFunc) -> None:
        self._index_funcs[name] = func
        index: dict[str, set[Key]] = {}
        for key, data in self._items.items():
            for value in func(_decode(data)):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def put(self, obj: Object) -> Object | None:
        """Store `obj`; return the object it replaced."""
        key = key_of(obj)
        old = self.remove(key)
        self._items[key] = codec.encode(obj)
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                index.setdefault(value, set()).add(key)
        return old

    def remove(self, key: Key) -> Object | None:
        data = self._items.pop(key, None)
        if data is None:
            return None
        old = _decode(data)
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(old):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
        return old


def _decode(data: bytes) -> Object:
    obj: Object = codec.decode(data)
    return obj
