"""Generated failure scenarios with a known cause, to measure `setpoint explain` (bench/insight.py
imports this file) and to test it (tests/insight/test_ranking_explain.py). Test data, not product
code: it lives with the tests, outside the library. Pure: a seed in, entries out; no I/O, no clock.

A scenario is a timeline as setpoint's recorder would write it for a webapp-like world: a `db`
Process, a `migrate` Job that depends on it, a `web` Deployment that depends on the migration
(and, in half the worlds, on the db directly) and owns replica Processes `web-0..`, a `web`
Service, and unrelated objects (a `cache` Process, a `worker` Deployment with its replicas, a
`report` Job, a `metrics-agent` Process). Hours of history come first: routine log lines,
Normal events, successful probes, harmless changes (some of the same kind as the faults), a
flapping unrelated object, and sometimes earlier incidents of some family, each repaired by a
revert. Then one fault is injected by a real change, and the failure follows the way the
workloads would show it (exits, back-offs, log lines never seen before, conditions). At least
five decoy changes surround it, before and after the true change, on related and unrelated
objects, some harmless spec changes with their own restarts and new log lines.

The families: `bad_config` (a db setting that makes it refuse clients), `dependency_down` (a
db change that makes it crash), `resource_exhaustion` (more workers than memory allows, in web
or in the db), `bad_rollout` (a new web version that cannot start: the Deployment stalls) and
`flapping_probe` (a web readiness probe too tight to pass reliably); and three whose cause is a
change of a dependency, in a world where web also depends on the `cache`, the `worker`
Deployment depends on web, and the db takes its password from the Secret `db-credentials`:
`exhaustion` (a dependency's limit or flag lowered: a memory limit, `--maxmemory`,
`--max-connections`; then kills or refusals over and over), `dependency_config` (a
dependency's env, args, port or Secret changed: it runs, its clients fail) and `cascade` (a
change of the db whose failure travels two or more hops to the `worker`). Earlier incidents are
always of the first five.

`Scenario.cause` is the ground truth, kept apart from `entries` (the same dict object as the
one in `entries`, found by identity); nothing in an entry marks it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from setpoint.insight.entries import ObjectRef

BASE_FAMILIES = (
    "bad_config",
    "dependency_down",
    "resource_exhaustion",
    "bad_rollout",
    "flapping_probe",
)
DEPENDENCY_FAMILIES = ("exhaustion", "dependency_config", "cascade")
"""Families whose world has the extra dependencies (web on cache, worker on web, db on its
Secret)."""
FAMILIES = BASE_FAMILIES + DEPENDENCY_FAMILIES

NS = "default"


@dataclass
class Scenario:
    """A timeline, the object that failed and the entry that caused it."""

    family: str
    seed: int
    entries: list[dict[str, Any]]
    target: ObjectRef
    cause: dict[str, Any]
    failure_ts: float
    decoys: int


def ref(kind: str, name: str) -> dict[str, str]:
    return {"kind": kind, "name": name, "namespace": NS}


@dataclass
class _World:
    """Appends entries as the recorder would; `entries` are sorted at the end."""

    rng: random.Random
    entries: list[dict[str, Any]] = field(default_factory=list)
    web_replicas: list[str] = field(default_factory=list)
    values: dict[tuple[str, str], Any] = field(default_factory=dict)
    extended: bool = False
    """The world of `DEPENDENCY_FAMILIES`: web depends on the cache, the worker on web, the db
    on its Secret."""

    def add(self, ts: float, type_: str, obj: dict[str, str], **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"ts": round(ts, 3), "type": type_, "object": obj, **fields}
        self.entries.append(entry)
        return entry

    def edge(self, ts: float, source: dict[str, str], target: dict[str, str], rel: str) -> None:
        self.entries.append(
            {"ts": round(ts, 3), "type": "edge", "from": source, "to": target, "relation": rel}
        )

    def change(
        self, ts: float, obj: dict[str, str], path: str, new: Any, actor: str = "alice"
    ) -> dict[str, Any]:
        key = (obj["name"], path)
        old = self.values.get(key)
        self.values[key] = new
        return self.add(ts, "change", obj, diff={path: [old, new]}, actor=actor)

    def pick(self, obj: dict[str, str], path: str, options: list[Any]) -> Any:
        """One of `options` other than the current value (a recorder records no no-op change)."""
        current = self.values.get((obj["name"], path))
        return self.rng.choice([o for o in options if o != current])

    def ready(self, ts: float, obj: dict[str, str], ok: bool, reason: str, msg: str = "") -> None:
        status = "True" if ok else "False"
        cond = {"type": "Ready", "status": status, "reason": reason, "message": msg}
        self.add(ts, "condition", obj, condition=cond)

    def log(self, ts: float, obj: dict[str, str], line: str) -> None:
        self.add(ts, "log", obj, line=line)

    def event(self, ts: float, obj: dict[str, str], etype: str, reason: str, msg: str) -> None:
        self.add(ts, "event", obj, eventType=etype, reason=reason, message=msg)

    def restart(
        self, ts: float, obj: dict[str, str], ready_after: float, reason: str, ready: bool = True
    ) -> None:
        """A spec change restarts a process: it is stopped (SIGTERM), starts, turns Ready
        (unless `ready` is False: something else keeps it from being Ready)."""
        self.add(ts + 0.2, "exit", obj, exitCode=None, signal=15)
        self.event(ts + 0.3, obj, "Normal", "Started", "started the process")
        self.log(ts + 0.5, obj, _routine_line(self.rng, obj["name"], start=True))
        if ready:
            self.ready(ts + ready_after, obj, True, reason)


def _ip(rng: random.Random) -> str:
    return f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _routine_line(rng: random.Random, name: str, *, start: bool = False) -> str:
    stamp = f"2026-11-{rng.randint(10, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    if name == "db":
        if start:
            return f"{stamp} UTC [{rng.randint(100, 9999)}] LOG:  database system is ready"
        return rng.choice(
            [
                f"{stamp} UTC [{rng.randint(100, 9999)}] LOG:  connection received: "
                f"host={_ip(rng)} port={rng.randint(30000, 60000)}",
                f"{stamp} UTC [{rng.randint(100, 9999)}] LOG:  checkpoint complete: wrote "
                f"{rng.randint(1, 900)} buffers",
            ]
        )
    if name.startswith("web"):
        if start:
            return f"INFO:     Uvicorn running on http://0.0.0.0:{rng.choice([8000, 18080])}"
        path = rng.choice(["/", "/api/orders", "/healthz", f"/api/orders/{rng.randint(1, 999)}"])
        return f'INFO:     {_ip(rng)} - "GET {path} HTTP/1.1" 200 OK'
    if name.startswith("worker"):
        job, ms = rng.randint(1, 99999), rng.randint(1, 900)
        return f"{stamp} INFO worker: processed job {job} in {ms} ms"
    if name == "cache":
        return f"{stamp} * DB saved on disk ({rng.randint(1, 99)} keys changed)"
    if name == "migrate":
        step, ms = rng.randint(1, 60), rng.randint(1, 900)
        return f"{stamp} INFO migrate: applying migration {step:04d} ({ms} ms)"
    return f"{stamp} INFO {name}: scraped {rng.randint(10, 999)} samples"


def _recurring_warning(rng: random.Random, name: str) -> str:
    """The warnings a healthy system also logs now and then (so they are not news)."""
    if name == "db":
        return (
            f"ERROR:  canceling statement due to statement timeout (pid {rng.randint(100, 9999)})"
        )
    if name.startswith("web"):
        return f"WARNING web.db: query timed out after {rng.randint(1, 9)}.{rng.randint(0, 9)}s"
    return f"WARNING {name}: slow operation took {rng.randint(1, 9)} s"


# -- the fault families: (world, t) -> (cause entry, failure time) -------------------------

WEB = ref("Deployment", "web")
DB = ref("Process", "db")


def _web_fails(w: _World, t: float, reason: str, msg: str) -> float:
    """Every web replica and then the Deployment go NotReady from `t` on; return the latter."""
    for i, name in enumerate(w.web_replicas):
        w.ready(t + 0.3 * i, ref("Process", name), False, reason, msg)
    failed = t + 0.3 * len(w.web_replicas) + w.rng.uniform(0.5, 2.0)
    w.ready(failed, WEB, False, "ReplicasNotReady", f"0/{len(w.web_replicas)} replicas ready")
    return failed


def _bad_config(w: _World, t: float) -> tuple[dict[str, Any], float]:
    rng = w.rng
    cause = w.change(t, DB, "spec.args[3]", "--max-connections=5")
    w.restart(t, DB, 1.5, "ProbeSucceeded")
    t1 = t + rng.uniform(5, 40)
    for k in range(rng.randint(2, 5)):
        w.log(
            t1 + k,
            DB,
            f"2026-11-29 10:0{k}:1{k} UTC [{rng.randint(100, 9999)}] "
            "FATAL:  sorry, too many clients already",
        )
    for name in w.web_replicas:
        w.log(
            t1 + 0.5,
            ref("Process", name),
            "ERROR web.db: could not connect: FATAL: sorry, too many clients already "
            f"(host={_ip(rng)})",
        )
    return cause, _web_fails(w, t1 + rng.uniform(2, 10), "ProbeFailed", "GET /healthz: 503")


def _dependency_down(w: _World, t: float) -> tuple[dict[str, Any], float]:
    rng = w.rng
    cause = w.change(t, DB, "spec.args[2]", rng.choice(["/var/lib/db/data2", "15433x", "--port=0"]))
    w.add(t + 0.2, "exit", DB, exitCode=None, signal=15)
    w.ready(t + 0.4, DB, False, "ProcessExited", "the process exited")
    for k in range(rng.randint(2, 4)):
        at = t + 0.5 + 10 * (2**k - 1)
        w.log(
            at,
            DB,
            f"FATAL:  could not open configuration {rng.choice(['file', 'directory'])} "
            f'"/var/lib/db/x{k}": No such file or directory',
        )
        w.add(at + 0.1, "exit", DB, exitCode=1, signal=None, lines=["FATAL: ..."])
        w.event(at + 0.2, DB, "Warning", "BackOff", "back-off restarting the failed process")
    failed = _web_fails(w, t + rng.uniform(1, 15), "DependencyNotReady", "Process/db is not Ready")
    return cause, failed


def _resource_exhaustion(w: _World, t: float) -> tuple[dict[str, Any], float]:
    rng = w.rng
    if rng.random() < 0.5:
        cause = w.change(t, WEB, "spec.template.spec.env.WORKERS", str(rng.choice([32, 48, 64])))
        victims = [ref("Process", n) for n in w.web_replicas]
    else:
        cause = w.change(t, DB, "spec.env.SHARED_BUFFERS", rng.choice(["8GB", "12GB", "16GB"]))
        victims = [DB]
    for v in victims:
        w.restart(t + rng.uniform(0, 3), v, 1.0, "ProbeSucceeded")
    t1 = t + rng.uniform(10, 60)
    for v in victims:
        for k in range(3):
            at = t1 + 10 * (2**k - 1) + rng.uniform(0, 1)
            w.log(at, v, "MemoryError")
            w.add(at + 0.1, "exit", v, exitCode=137, signal=9)
            w.event(at + 0.2, v, "Warning", "BackOff", "back-off restarting the failed process")
    if victims == [DB]:
        w.ready(t1 + 0.3, DB, False, "ProcessExited", "killed by signal 9")
        return cause, _web_fails(
            w, t1 + rng.uniform(1, 8), "DependencyNotReady", "Process/db is not Ready"
        )
    return cause, _web_fails(w, t1 + 0.5, "CrashLoopBackOff", "back-off 10s restarting")


def _bad_rollout(w: _World, t: float) -> tuple[dict[str, Any], float]:
    rng = w.rng
    cause = w.change(t, WEB, "spec.template.spec.args[1]", f"shop:v1.{rng.randint(5, 9)}")
    new = f"web-{len(w.web_replicas) + rng.randint(0, 5)}-new"
    obj = ref("Process", new)
    w.change(
        t + 0.5, obj, "spec", {"args": ["python", "-m", "shop"]}, actor="controller/deployment"
    )
    w.edge(t + 0.5, obj, WEB, "ownerReference")
    for k in range(4):
        at = t + 1 + 10 * (2**k - 1)
        w.log(at, obj, "Traceback (most recent call last):")
        w.log(
            at + 0.01,
            obj,
            f"ModuleNotFoundError: No module named '{rng.choice(['orjson', 'psycopg', 'yaml'])}'",
        )
        w.add(at + 0.1, "exit", obj, exitCode=1, signal=None)
        w.event(at + 0.2, obj, "Warning", "BackOff", "back-off restarting the failed process")
    stalled = t + rng.uniform(60, 180)
    cond = {
        "type": "Stalled",
        "status": "True",
        "reason": "ProgressDeadlineExceeded",
        "message": f"{new} never became Ready",
    }
    w.add(stalled, "condition", WEB, condition=cond)
    return cause, stalled


def _flapping_probe(w: _World, t: float) -> tuple[dict[str, Any], float]:
    rng = w.rng
    path = rng.choice(
        [
            "spec.template.spec.readinessProbe.timeoutSeconds",
            "spec.template.spec.readinessProbe.failureThreshold",
        ]
    )
    cause = w.change(t, WEB, path, rng.choice([0.05, 0.1]) if path.endswith("Seconds") else 1)
    for name in w.web_replicas:
        w.restart(t + rng.uniform(0, 4), ref("Process", name), 1.0, "ProbeSucceeded")
    t1 = t + rng.uniform(5, 30)
    for k in range(6):
        for i, name in enumerate(w.web_replicas):
            p = ref("Process", name)
            ok = (k + i) % 2 == 1
            w.add(
                t1 + 3 * k + i * 0.1,
                "probe",
                p,
                role="readiness",
                result="success" if ok else "failure",
            )
            if k < 5:
                w.ready(
                    t1 + 3 * k + i * 0.1 + 0.05,
                    p,
                    ok,
                    "ProbeSucceeded" if ok else "ProbeFailed",
                    "",
                )
            if not ok:
                w.event(
                    t1 + 3 * k + i * 0.1 + 0.06,
                    p,
                    "Warning",
                    "Unhealthy",
                    "Readiness probe failed: timeout",
                )
    failed = t1 + rng.uniform(3, 15)
    w.ready(failed, WEB, False, "ReplicasNotReady", "flapping replicas")
    return cause, failed


CACHE = ref("Process", "cache")
WORKER = ref("Deployment", "worker")
SECRET = ref("Secret", "db-credentials")


def _killed_over_and_over(
    w: _World, t: float, obj: dict[str, str], line: str, *, signal: Any = 9
) -> float:
    """`obj` is killed (by the kernel: SIGKILL) again and again from `t`, restarted after a
    growing back-off, sometimes Ready for a moment in between; return its first kill."""
    rng = w.rng
    at = t
    for k in range(rng.randint(3, 8)):
        w.log(at - 0.05, obj, line)
        w.add(at, "exit", obj, exitCode=137 if signal == 9 else None, signal=signal, lines=[line])
        if k == 0:
            w.ready(at + 0.1, obj, False, "ProcessExited", "killed by signal 9")
        w.event(at + 0.2, obj, "Warning", "BackOff", "back-off restarting the failed process")
        back_off = min(10 * 2**k, 60) + rng.uniform(0, 1)
        w.event(at + back_off, obj, "Normal", "Started", "started the process")
        if rng.random() < 0.4:  # up long enough to pass a probe, then killed again
            w.ready(at + back_off + 1, obj, True, "ProbeSucceeded")
            w.ready(at + back_off + 3, obj, False, "ProcessExited", "killed by signal 9")
            at += back_off + 3
        else:
            at += back_off + rng.uniform(0.5, 2)
    return t


def _replicas_crash(w: _World, t: float, line: str) -> float:
    """Each web replica exits with `line` over and over from `t`; return when web is not
    Ready (a crash loop)."""
    rng = w.rng
    for i, name in enumerate(w.web_replicas):
        p = ref("Process", name)
        at = t + 0.3 * i
        for k in range(rng.randint(2, 4)):
            w.log(at - 0.01, p, line)
            w.add(at, "exit", p, exitCode=1, signal=None, lines=[line])
            w.event(at + 0.2, p, "Warning", "BackOff", "back-off restarting the failed process")
            at += 10 * 2**k + rng.uniform(0, 1)
    return _web_fails(w, t + rng.uniform(1, 5), "CrashLoopBackOff", "back-off restarting")


def _web_errors(w: _World, t: float, line: str) -> float:
    """Each web replica logs `line` and fails its readiness probe; return when web is not
    Ready."""
    for name in w.web_replicas:
        w.log(t + w.rng.uniform(0, 1), ref("Process", name), f"{line} (req {_ip(w.rng)})")
    return _web_fails(w, t + w.rng.uniform(2, 8), "ProbeFailed", "GET /healthz: 500")


def _db_restarted_later(w: _World, t: float) -> float:
    """Someone restarts the db later (an annotation a restart command sets): it stops on
    request and starts with what its inputs say now; return when it is up again."""
    at = t + w.rng.uniform(30, 600)
    w.change(at, DB, "metadata.annotations.setpoint.dev/restartedAt", str(int(at)), "oncall")
    w.restart(at, DB, 1.5, "ProbeSucceeded")
    return at + 2


def _exhaustion(w: _World, t: float) -> tuple[dict[str, Any], float]:
    """A dependency's limit or flag lowered; then it is killed, or refuses, over and over."""
    rng = w.rng
    shape = rng.choice(["cache_memory", "maxmemory", "connections", "db_memory"])
    if shape == "cache_memory":
        limit = rng.choice(["48Mi", "32Mi", "64Mi"])
        cause = w.change(t, CACHE, "spec.resources.memoryLimit", limit)
        w.restart(t, CACHE, 1.0, "ProbeSucceeded")
        killed = _killed_over_and_over(
            w, t + rng.uniform(5, 120), CACHE, "# Background saving started by pid 41"
        )
        for name in w.web_replicas:
            w.log(
                killed + rng.uniform(0.2, 2),
                ref("Process", name),
                "redis.exceptions.ConnectionError: Error 111 connecting to cache:6379. "
                "Connection refused.",
            )
        failed = _web_fails(
            w, killed + rng.uniform(1, 10), "DependencyNotReady", "Process/cache is not Ready"
        )
    elif shape == "maxmemory":
        cause = w.change(
            t, CACHE, "spec.args[2]", rng.choice(["--maxmemory=1mb", "--maxmemory=2mb"])
        )
        w.restart(t, CACHE, 1.0, "ProbeSucceeded")
        failed = _web_errors(
            w,
            t + rng.uniform(5, 90),
            "ERROR redis.exceptions.OutOfMemoryError: OOM command not allowed when used "
            "memory > 'maxmemory'.",
        )
    elif shape == "connections":
        cause = w.change(
            t, DB, "spec.args[3]", rng.choice(["--max-connections=3", "--max-connections=2"])
        )
        w.restart(t, DB, 1.5, "ProbeSucceeded")
        t1 = t + rng.uniform(5, 60)
        w.log(t1 - 0.5, DB, "FATAL:  remaining connection slots are reserved")
        failed = _replicas_crash(
            w,
            t1,
            'psycopg.OperationalError: connection to server at "db" failed: FATAL:  sorry, '
            "too many clients already",
        )
    else:
        cause = w.change(t, DB, "spec.resources.memoryLimit", rng.choice(["64Mi", "96Mi"]))
        w.restart(t, DB, 1.5, "ProbeSucceeded")
        killed = _killed_over_and_over(
            w, t + rng.uniform(5, 120), DB, "LOG:  checkpoint starting: time", signal="SIGKILL"
        )
        failed = _web_fails(
            w, killed + rng.uniform(1, 10), "DependencyNotReady", "Process/db is not Ready"
        )
    return cause, failed


def _dependency_config(w: _World, t: float) -> tuple[dict[str, Any], float]:
    """A dependency's env, args, port or Secret changed: it runs (and is Ready), its clients
    cannot reach it or log in."""
    rng = w.rng
    shape = rng.choice(["env_port", "args_port", "secret", "cache_port"])
    refused = (
        'psycopg.OperationalError: connection to server at "db" (10.0.0.5), port 5432 '
        "failed: Connection refused"
    )
    if shape == "env_port":
        cause = w.change(t, DB, "spec.env.PGPORT", rng.choice(["5433", "6432"]))
        w.restart(t, DB, 1.5, "ProbeSucceeded")
        failed = _replicas_crash(w, t + rng.uniform(3, 40), refused)
    elif shape == "args_port":
        cause = w.change(t, DB, "spec.args[4]", rng.choice(["--port=5433", "--port=6543"]))
        w.restart(t, DB, 1.5, "ProbeSucceeded")
        failed = _replicas_crash(w, t + rng.uniform(3, 40), refused)
    elif shape == "secret":
        cause = w.change(t, SECRET, "data.password", "(changed)")
        up = _db_restarted_later(w, t)
        w.log(up + 1, DB, 'FATAL:  password authentication failed for user "shop"')
        failed = _replicas_crash(
            w,
            up + rng.uniform(1, 5),
            'psycopg.OperationalError: FATAL:  password authentication failed for user "shop"',
        )
    else:
        cause = w.change(t, CACHE, "spec.args[3]", rng.choice(["--port=6380", "--port=7000"]))
        w.restart(t, CACHE, 1.0, "ProbeSucceeded")
        failed = _web_errors(
            w,
            t + rng.uniform(3, 40),
            "ERROR redis.exceptions.ConnectionError: Error 111 connecting to cache:6379. "
            "Connection refused.",
        )
    return cause, failed


def _cascade(w: _World, t: float) -> tuple[dict[str, Any], float]:
    """A db change whose failure travels to web and from web to the worker (two or more
    hops): the worker, which depends on web, is what is explained."""
    rng = w.rng
    cause, web_failed = rng.choice([_dependency_down, _exhaustion_of_db, _db_port])(w, t)
    at = web_failed + rng.uniform(1, 20)
    for name in ("worker-0", "worker-1"):
        w.log(
            at - rng.uniform(0, 1),
            ref("Process", name),
            "ERROR worker: upstream http://web/api/orders returned 503",
        )
    w.ready(at, WORKER, False, "DependencyNotReady", "Deployment/web is not Ready")
    return cause, at


def _exhaustion_of_db(w: _World, t: float) -> tuple[dict[str, Any], float]:
    cause = w.change(t, DB, "spec.resources.memoryLimit", w.rng.choice(["64Mi", "96Mi"]))
    w.restart(t, DB, 1.5, "ProbeSucceeded")
    killed = _killed_over_and_over(w, t + w.rng.uniform(5, 120), DB, "LOG:  autovacuum launcher")
    return cause, _web_fails(
        w, killed + w.rng.uniform(1, 10), "DependencyNotReady", "Process/db is not Ready"
    )


def _db_port(w: _World, t: float) -> tuple[dict[str, Any], float]:
    cause = w.change(t, DB, "spec.env.PGPORT", w.rng.choice(["5433", "6432"]))
    w.restart(t, DB, 1.5, "ProbeSucceeded")
    return cause, _replicas_crash(
        w,
        t + w.rng.uniform(3, 40),
        'psycopg.OperationalError: connection to server at "db", port 5432 failed: '
        "Connection refused",
    )


FAULTS: dict[str, Callable[[_World, float], tuple[dict[str, Any], float]]] = {
    "bad_config": _bad_config,
    "dependency_down": _dependency_down,
    "resource_exhaustion": _resource_exhaustion,
    "bad_rollout": _bad_rollout,
    "flapping_probe": _flapping_probe,
    "exhaustion": _exhaustion,
    "dependency_config": _dependency_config,
    "cascade": _cascade,
}


# -- harmless changes (history and decoys) --------------------------------------------------

UNRELATED = [
    ref("Process", "cache"),
    ref("Deployment", "worker"),
    ref("Job", "report"),
    ref("Process", "metrics-agent"),
    ref("Service", "web"),
]


def _harmless_change(w: _World, t: float, *, after_fault: bool = False) -> None:
    """One change that breaks nothing, with what it does to the world (restarts, new lines).
    After the fault, web replicas restarted by it do not turn Ready again, and the db's own
    settings are left alone (a db restart would end the fault)."""
    rng = w.rng
    choice = rng.randrange(9)
    if after_fault and choice in (4, 5, 7) and (w.extended or choice != 7):
        choice = rng.choice([0, 1, 2, 3, 6, 8] if w.extended else [0, 1, 2, 3, 6, 7, 8])
    obj = rng.choice([WEB, DB, ref("Job", "migrate"), *UNRELATED])
    if choice == 0:
        path = "metadata.annotations.deploy/notes"
        w.change(
            t, obj, path, w.pick(obj, path, [f"ticket-{rng.randint(1, 9999)}", "retry", "audit"])
        )
    elif choice == 1:
        path = f"metadata.labels.{rng.choice(['team', 'tier', 'owner'])}"
        w.change(t, obj, path, w.pick(obj, path, ["shop", "core", "bob", "ops"]))
    elif choice == 2:
        target = rng.choice([WEB, ref("Deployment", "worker")])
        w.change(t, target, "spec.replicas", w.pick(target, "spec.replicas", [2, 3, 4, 5]))
    elif choice == 3:
        path = "spec.template.spec.env.LOG_LEVEL"
        w.change(t, WEB, path, w.pick(WEB, path, ["debug", "info", "warning"]))
        for name in w.web_replicas:
            p = ref("Process", name)
            w.restart(t + rng.uniform(0.5, 3), p, 1.0, "ProbeSucceeded", ready=not after_fault)
            w.log(
                t + 4,
                p,
                f"DEBUG web.cache: cache miss for key order:{rng.randint(1, 999)} "
                f"({rng.randint(0, 99)} ms)",
            )
    elif choice == 4:
        options = [f"--max-connections={n}" for n in (100, 200, 300)]
        w.change(t, DB, "spec.args[3]", w.pick(DB, "spec.args[3]", options))
        w.restart(t, DB, 1.5, "ProbeSucceeded")
    elif choice == 5:
        w.change(t, DB, "spec.env.TZ", w.pick(DB, "spec.env.TZ", ["UTC", "Europe/Paris"]))
        w.restart(t, DB, 1.5, "ProbeSucceeded")
    elif choice == 6:
        worker, path = ref("Deployment", "worker"), "spec.template.spec.args[1]"
        w.change(t, worker, path, w.pick(worker, path, [f"worker:v2.{n}" for n in range(30)]))
        w.log(
            t + 3,
            ref("Process", "worker-0"),
            f"INFO worker: version 2.{rng.randint(0, 30)} starting with "
            f"{rng.randint(1, 8)} threads",
        )
    elif choice == 7:
        cache = ref("Process", "cache")
        options = [f"--maxmemory={n}mb" for n in (256, 512, 1024)]
        w.change(t, cache, "spec.args[2]", w.pick(cache, "spec.args[2]", options))
        w.restart(t, ref("Process", "cache"), 1.0, "ProbeSucceeded")
    else:
        service = ref("Service", "web")
        w.change(
            t, service, "spec.ports[0].port", w.pick(service, "spec.ports[0].port", [80, 8080])
        )


def _create_world(w: _World, t: float) -> None:
    rng = w.rng
    replicas = rng.randint(2, 3)
    w.web_replicas = [f"web-{i}" for i in range(replicas)]
    objects = [DB, ref("Job", "migrate"), WEB, *UNRELATED]
    objects += [ref("Process", n) for n in w.web_replicas] + [
        ref("Process", "worker-0"),
        ref("Process", "worker-1"),
    ]
    for i, obj in enumerate(objects):
        w.change(t + i * 0.1, obj, "spec", {"created": obj["name"]}, actor="alice")
    for key, value in {
        ("db", "spec.args[3]"): "--max-connections=100",
        ("db", "spec.args[2]"): "/var/lib/db/data",
        ("db", "spec.env.SHARED_BUFFERS"): "1GB",
        ("db", "spec.env.TZ"): "UTC",
        ("web", "spec.template.spec.env.WORKERS"): "4",
        ("web", "spec.template.spec.args[1]"): "shop:v1.4",
        ("web", "spec.template.spec.env.LOG_LEVEL"): "info",
        ("web", "spec.template.spec.readinessProbe.timeoutSeconds"): 1,
        ("web", "spec.template.spec.readinessProbe.failureThreshold"): 3,
        ("web", "spec.replicas"): replicas,
        ("worker", "spec.replicas"): 2,
    }.items():
        w.values[key] = value
    w.edge(t + 2, ref("Job", "migrate"), DB, "dependsOn")
    w.edge(t + 2, WEB, ref("Job", "migrate"), "dependsOn")
    if rng.random() < 0.5:
        w.edge(t + 2, WEB, DB, "dependsOn")
    for n in w.web_replicas:
        w.edge(t + 2, ref("Process", n), WEB, "ownerReference")
    for n in ("worker-0", "worker-1"):
        w.edge(t + 2, ref("Process", n), ref("Deployment", "worker"), "ownerReference")
    if w.extended:
        w.change(t + 1.5, SECRET, "data", {"password": "(hidden)"}, actor="alice")
        w.edge(t + 2, WEB, CACHE, "dependsOn")
        w.edge(t + 2, WORKER, WEB, "dependsOn")
        w.edge(t + 2, DB, SECRET, "uses")
        for key, value in {
            ("cache", "spec.resources.memoryLimit"): "512Mi",
            ("cache", "spec.args[2]"): "--maxmemory=512mb",
            ("cache", "spec.args[3]"): "--port=6379",
            ("db", "spec.resources.memoryLimit"): "1Gi",
            ("db", "spec.env.PGPORT"): "5432",
            ("db", "spec.args[4]"): "--port=5432",
            ("db-credentials", "data.password"): "(hidden)",
        }.items():
            w.values[key] = value
    w.ready(t + 5, DB, True, "ProbeSucceeded")
    cond = {"type": "Complete", "status": "True", "reason": "Succeeded", "message": ""}
    w.add(t + 8, "condition", ref("Job", "migrate"), condition=cond)
    w.add(t + 8.1, "exit", ref("Job", "migrate"), exitCode=0, signal=None)
    for i, obj in enumerate(objects):
        if obj["kind"] != "Job" and obj is not DB:
            w.ready(t + 10 + i * 0.2, obj, True, "ProbeSucceeded")


def _noise(w: _World, start: float, end: float, rate_per_min: float) -> None:
    """Routine lines, Normal events, probes, and an unrelated flapping cache, in [start, end)."""
    rng = w.rng
    talkers = ["db", *w.web_replicas, "worker-0", "worker-1", "cache", "metrics-agent", "migrate"]
    n = int((end - start) / 60 * rate_per_min)
    for _ in range(n):
        t = rng.uniform(start, end)
        name = rng.choice(talkers)
        kind = "Job" if name == "migrate" else "Process"
        roll = rng.random()
        if roll < 0.02 and name != "migrate":
            w.log(t, ref(kind, name), _recurring_warning(rng, name))
        elif roll < 0.75:
            w.log(t, ref(kind, name), _routine_line(rng, name))
        elif roll < 0.85:
            w.add(t, "probe", ref(kind, name), role="readiness", result="success")
        elif roll < 0.95:
            w.event(t, ref(kind, name), "Normal", "Pulled", "image already present")
        else:
            cache = ref("Process", "cache")
            w.event(t, cache, "Warning", "Unhealthy", "Readiness probe failed: PONG timeout")
            w.ready(t + 0.1, cache, False, "ProbeFailed", "PING timed out")
            w.log(t + 0.2, cache, f"# WARNING: latency spike {rng.randint(100, 999)} ms")
            w.ready(t + rng.uniform(3, 20), cache, True, "ProbeSucceeded")


def _past_incident(w: _World, t: float) -> float:
    """An earlier incident of some family, repaired by reverting its change; return the end."""
    family = w.rng.choice(BASE_FAMILIES)
    before = dict(w.values)
    cause, failed = FAULTS[family](w, t)
    ((path, _),) = cause["diff"].items()
    end = failed + w.rng.uniform(120, 600)
    obj = cause["object"]
    w.change(end, obj, path, before.get((obj["name"], path)), actor="oncall")
    for name in w.web_replicas:
        w.ready(end + 5, ref("Process", name), True, "ProbeSucceeded")
    w.ready(end + 5, DB, True, "ProbeSucceeded")
    w.ready(end + 6, WEB, True, "AllReplicasReady")
    if family == "bad_rollout":
        cond = {"type": "Stalled", "status": "False", "reason": "RolledBack", "message": ""}
        w.add(end + 6, "condition", WEB, condition=cond)
    return end + 10


def generate(seed: int, family: str | None = None, *, history_h: float = 3.0) -> Scenario:
    """The scenario of `seed` (its family drawn from the seed unless given)."""
    rng = random.Random(seed)
    family = family or rng.choice(FAMILIES)
    w = _World(rng, extended=family in DEPENDENCY_FAMILIES)
    t0 = 1_700_000_000.0 + seed * 100_000.0
    _create_world(w, t0)
    fault_at = t0 + history_h * 3600
    _noise(w, t0 + 20, fault_at + 900, rate_per_min=rng.uniform(10, 30))
    t = t0 + 600
    incidents = rng.choice([0, 0, 1, 2])
    marks = sorted(rng.uniform(t0 + 900, fault_at - 3600) for _ in range(incidents))
    harmless = sorted(rng.uniform(t0 + 60, fault_at - 1800) for _ in range(rng.randint(8, 20)))
    schedule = sorted([(at, False) for at in harmless] + [(at, True) for at in marks])
    for at, incident in schedule:
        if incident:
            t = _past_incident(w, max(t, at))
        elif at > t:
            _harmless_change(w, at)
    decoys = rng.randint(5, 8)
    after = max(2, decoys // 2)
    for _ in range(decoys - after):  # before the fault, so that the fault sees their values
        _harmless_change(w, fault_at - rng.uniform(5, 900))
    w.entries.sort(key=lambda e: e["ts"])
    cause, failed = FAULTS[family](w, fault_at)
    gap = failed - fault_at
    for _ in range(after):
        _harmless_change(w, fault_at + gap * rng.uniform(0.1, 0.9), after_fault=True)
    w.entries.sort(key=lambda e: e["ts"])
    target = WORKER if family == "cascade" else WEB
    return Scenario(
        family,
        seed,
        w.entries,
        ObjectRef(target["kind"], target["name"], NS),
        cause,
        failed,
        decoys,
    )


def suite(count: int, first_seed: int = 1) -> list[Scenario]:
    """`count` scenarios, the families in turn, seeds from `first_seed`."""
    return [generate(first_seed + i, FAMILIES[i % len(FAMILIES)]) for i in range(count)]
