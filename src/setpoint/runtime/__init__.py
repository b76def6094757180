"""The controller runtime: the loop that observes, diffs and applies, for any kind.

Informers list and watch the store into indexed caches; events become keys in
a work queue; controllers hand each key to a one-method reconciler and apply
what its outcome means (the reconciler kit, `KitReconciler`, is the observe -> plan ->
apply loop every built-in controller runs); the manager runs it all, with leader election (of the
whole manager or per controller) or sharding among several managers, garbage
collection of owned objects, an event recorder, metrics and health probes.

Its own kinds are `Event` (v1) and `Lease` (coordination.k8s.io/v1): `register(registry)`
adds them to a registry (a `Manager` adds them to its store's); importing registers nothing.
Names are imported on first use (`setpoint.lazy`): importing the package imports none of
its modules but `setpoint.runtime.kinds`.
"""

from setpoint import lazy
from setpoint.runtime.kinds import EVENT, KINDS, LEASE, register

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

if TYPE_CHECKING:
    from setpoint.runtime.builder import ControllerBuilder
    from setpoint.runtime.cache import Cache
    from setpoint.runtime.controller import Controller, ControllerObserver, ControllerSettings
    from setpoint.runtime.coordination import Coordination
    from setpoint.runtime.events import NORMAL, WARNING, EventRecorder
    from setpoint.runtime.gc import GarbageCollector
    from setpoint.runtime.informer import Informer, InformerEvent
    from setpoint.runtime.kit import Acted, KindRules, KitReconciler
    from setpoint.runtime.leases import LeaderElector, LeaseSettings
    from setpoint.runtime.lifecycle import (
        add_finalizer,
        controller_of,
        has_finalizer,
        is_deleting,
        owner_reference,
        remove_finalizer,
        set_controller_reference,
    )
    from setpoint.runtime.manager import Manager, ManagerOptions
    from setpoint.runtime.metrics import Metrics
    from setpoint.runtime.plan import Plan, PlannedEvent
    from setpoint.runtime.predicates import (
        Predicate,
        and_,
        annotations_changed,
        generation_changed,
        labels_changed,
        not_,
        or_,
    )
    from setpoint.runtime.queue import QueueStatistics, ShutDown, WorkQueue
    from setpoint.runtime.ratelimit import (
        BucketLimiter,
        ItemExponentialLimiter,
        MaxOfLimiter,
        RateLimiter,
    )
    from setpoint.runtime.reconciler import Reconciler, Request, Result
    from setpoint.runtime.sharding import HashRing, ShardMember
    from setpoint.runtime.typed import Typed

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.runtime.builder": ("ControllerBuilder",),
        "setpoint.runtime.cache": ("Cache",),
        "setpoint.runtime.controller": ("Controller", "ControllerObserver", "ControllerSettings"),
        "setpoint.runtime.coordination": ("Coordination",),
        "setpoint.runtime.events": ("NORMAL", "WARNING", "EventRecorder"),
        "setpoint.runtime.gc": ("GarbageCollector",),
        "setpoint.runtime.informer": ("Informer", "InformerEvent"),
        "setpoint.runtime.kit": ("Acted", "KindRules", "KitReconciler"),
        "setpoint.runtime.leases": ("LeaderElector", "LeaseSettings"),
        "setpoint.runtime.lifecycle": (
            "add_finalizer",
            "controller_of",
            "has_finalizer",
            "is_deleting",
            "owner_reference",
            "remove_finalizer",
            "set_controller_reference",
        ),
        "setpoint.runtime.manager": ("Manager", "ManagerOptions"),
        "setpoint.runtime.metrics": ("Metrics",),
        "setpoint.runtime.plan": ("Plan", "PlannedEvent"),
        "setpoint.runtime.predicates": (
            "Predicate",
            "and_",
            "annotations_changed",
            "generation_changed",
            "labels_changed",
            "not_",
            "or_",
        ),
        "setpoint.runtime.queue": ("QueueStatistics", "ShutDown", "WorkQueue"),
        "setpoint.runtime.ratelimit": (
            "BucketLimiter",
            "ItemExponentialLimiter",
            "MaxOfLimiter",
            "RateLimiter",
        ),
        "setpoint.runtime.reconciler": ("Reconciler", "Request", "Result"),
        "setpoint.runtime.sharding": ("HashRing", "ShardMember"),
        "setpoint.runtime.typed": ("Typed",),
    },
)

__all__ = [
    "EVENT",
    "KINDS",
    "LEASE",
    "NORMAL",
    "WARNING",
    "Acted",
    "BucketLimiter",
    "Cache",
    "Controller",
    "ControllerBuilder",
    "ControllerObserver",
    "ControllerSettings",
    "Coordination",
    "EventRecorder",
    "GarbageCollector",
    "HashRing",
    "Informer",
    "InformerEvent",
    "ItemExponentialLimiter",
    "KindRules",
    "KitReconciler",
    "LeaderElector",
    "LeaseSettings",
    "Manager",
    "ManagerOptions",
    "MaxOfLimiter",
    "Metrics",
    "Plan",
    "PlannedEvent",
    "Predicate",
    "QueueStatistics",
    "RateLimiter",
    "Reconciler",
    "Request",
    "Result",
    "ShardMember",
    "ShutDown",
    "Typed",
    "WorkQueue",
    "add_finalizer",
    "and_",
    "annotations_changed",
    "controller_of",
    "generation_changed",
    "has_finalizer",
    "is_deleting",
    "labels_changed",
    "not_",
    "or_",
    "owner_reference",
    "register",
    "remove_finalizer",
    "set_controller_reference",
]
