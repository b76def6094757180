"""The world bench/chaos.py breaks and watches: a staged copy of examples/webapp in a private
directory, its store on a tmpfs of its own, `setpoint up` as a child that can be killed and
started again, the managed processes found in /proc by their marker, and a clean-up that
leaves nothing behind.

It decides nothing and judges nothing: when and what to break, and which invariants held,
is bench/chaos.py's job. Linux only. Mounting needs root: without it the store directory is
a plain directory and the faults on its disk say why they are unavailable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from recovery import stage_webapp

from setpoint.workloads.supervisor import MARKER_VARIABLE

STORE_TMPFS_BYTES = 256 * 1024 * 1024
ENGINE_STOP_S = 90.0
"""How long a graceful stop of `up` may take (the db's grace period is 30 s)."""
RESTART_RESET_S = 5
"""`backoff.resetAfterSeconds` given to db and the web replicas in the staged copy: a run
of 5 s counts as healthy, so a kill is not taken for a crash loop (the default is 600 s)."""


def progress(message: str) -> None:
    print(f"[bench chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- /proc ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """One live process as /proc shows it; `marker` is its SETPOINT_MARKER value, if any."""

    pid: int
    ppid: int
    state: str
    marker: str | None
    cmdline: str
    cwd: str

    def describe(self) -> str:
        return f"{self.pid} {self.cmdline[:160]}"


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_info(pid: int) -> ProcInfo | None:
    """`pid` as /proc shows it; None when it is gone, a zombie or a kernel thread."""
    stat = _read(f"/proc/{pid}/stat")
    cmdline = _read(f"/proc/{pid}/cmdline")
    if not stat or not cmdline:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    state = fields[0].decode()
    if state in ("Z", "X"):
        return None
    marker = None
    for entry in (_read(f"/proc/{pid}/environ") or b"").split(b"\0"):
        if entry.startswith(MARKER_VARIABLE.encode() + b"="):
            marker = entry.split(b"=", 1)[1].decode(errors="replace")
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = ""
    command = cmdline.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    return ProcInfo(pid, int(fields[1]), state, marker, command, cwd)


def all_processes() -> dict[int, ProcInfo]:
    """Every live process but this one."""
    found: dict[int, ProcInfo] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            info = proc_info(int(entry))
            if info is not None:
                found[info.pid] = info
    return found


def instances(procs: dict[int, ProcInfo], inside: str) -> dict[str, list[ProcInfo]]:
    """Per marker, the roots of its process trees under `inside`: the processes that carry
    the marker while their parent does not (PostgreSQL's backends inherit the marker from
    the postmaster; they are part of one instance, not more). Two roots for one marker are
    one managed object running twice."""
    roots: dict[str, list[ProcInfo]] = {}
    for info in procs.values():
        if info.marker is None or not info.cwd.startswith(inside):
            continue
        parent = procs.get(info.ppid)
        if parent is not None and parent.marker == info.marker:
            continue
        roots.setdefault(info.marker, []).append(info)
    return roots


def runs(pid: int | None, uid: str) -> bool:
    """Whether `pid` is alive and carries the marker of the object whose uid is `uid`."""
    info = proc_info(pid) if pid else None
    return info is not None and (info.marker or "").endswith(f":{uid}")


# -- ports ---------------------------------------------------------------------------------


def stranger(port: int) -> socket.socket | None:
    """A listening socket on 127.0.0.1:`port` held by someone setpoint does not know; None if
    the port cannot be taken now."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(8)
    except OSError:
        sock.close()
        return None
    return sock


def bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# -- the world -----------------------------------------------------------------------------


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@dataclass
class World:
    """The staged example under `tmp`, its store, its engine and what was done to them."""

    tmp: Path
    base: Path = field(init=False)
    store_dir: Path = field(init=False)
    manifest: Path = field(init=False)
    objects: list[dict[str, Any]] = field(init=False, default_factory=list)
    service_port: int = 0
    port_range: tuple[int, int] = (0, 0)
    mounted: str | None = None
    """None when the store dir is a tmpfs of its own, else why it is not."""
    readonly_how: str | None = None
    readonly_done: set[str] = field(default_factory=set)
    """How the store was made read-only, each way it was."""
    filler: Path | None = None
    engine: subprocess.Popen[bytes] | None = None
    second_engines: list[subprocess.Popen[bytes]] = field(default_factory=list)
    engine_starts: int = 0
    stopped_pids: set[int] = field(default_factory=set)
    strangers: list[socket.socket] = field(default_factory=list)
    _engine_log: IO[bytes] | None = None

    def __post_init__(self) -> None:
        self.base = self.tmp / "app"
        self.store_dir = self.tmp / "store"
        self.manifest = self.base / "examples" / "webapp" / "webapp.yaml"

    # -- set-up

    def stage(self) -> None:
        """Copy the example with free ports, mount the store dir, write the manifests."""
        self.tmp.chmod(0o711)  # the postgres OS user reaches its data directory below
        self.base.mkdir(mode=0o711)
        self.store_dir.mkdir(mode=0o700)
        self.mounted = self._mount_tmpfs()
        manifest, self.service_port, self.objects = stage_webapp(self.base)
        assert manifest == self.manifest
        for obj in self.objects:
            spec = obj["spec"]
            if obj["kind"] == "Deployment":
                rng = spec["portRange"]
                self.port_range = (rng["start"], rng["end"])
                spec["template"]["spec"]["backoff"] = {"resetAfterSeconds": RESTART_RESET_S}
            if obj["kind"] == "Process":
                spec["backoff"] = {"resetAfterSeconds": RESTART_RESET_S}
        self.manifest.write_text(yaml.safe_dump_all(self.objects, sort_keys=False))

    def _mount_tmpfs(self) -> str | None:
        if os.geteuid() != 0:
            return "not root: cannot mount a tmpfs on the store directory"
        done = _run(
            "mount", "-t", "tmpfs", "-o", f"size={STORE_TMPFS_BYTES},mode=0700",
            "chaos-store", str(self.store_dir),
        )  # fmt: skip
        if done.returncode != 0:
            return f"mount -t tmpfs failed: {done.stderr.strip()}"
        return None

    def object(self, kind: str, name: str) -> dict[str, Any]:
        return next(o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name)

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.store_dir / 'state.db'}"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SETPOINT_STORE": self.store_url}

    # -- the engine

    def start_engine(self) -> None:
        """`setpoint up` in the staged directory; its output is appended to engine.log."""
        self.engine_starts += 1
        if self._engine_log is None:
            self._engine_log = open(self.tmp / "engine.log", "ab")  # noqa: SIM115 - closed in teardown
        self._engine_log.write(f"==== start {self.engine_starts} at {time.time():.3f}\n".encode())
        self._engine_log.flush()
        self.engine = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", str(self.manifest)],
            cwd=self.base,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._engine_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C on the bench's terminal is the bench's to handle
        )

    def start_second_engine(self) -> subprocess.Popen[bytes]:
        """Another `setpoint up` of the same manifests on the same store (output appended to
        engine-second.log); the engine started by `start_engine` keeps running."""
        with open(self.tmp / "engine-second.log", "ab") as log:
            log.write(f"==== second up at {time.time():.3f}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [sys.executable, "-m", "setpoint", "up", str(self.manifest)],
                cwd=self.base, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.second_engines.append(proc)
        return proc

    def second_engine_log_tail(self, lines: int = 6) -> list[str]:
        try:
            text = (self.tmp / "engine-second.log").read_text(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def engine_alive(self) -> bool:
        return self.engine is not None and self.engine.poll() is None

    def kill_engine(self) -> None:
        if self.engine is not None and self.engine.poll() is None:
            self.engine.kill()
            self.engine.wait()

    def stop_engine(self, within: float = ENGINE_STOP_S) -> int | None:
        """SIGTERM `up` (a graceful stop); its exit status, or None if it had to be killed."""
        if self.engine is None or self.engine.poll() is not None:
            return None if self.engine is None else self.engine.returncode
        self.engine.send_signal(signal.SIGTERM)
        try:
            return self.engine.wait(within)
        except subprocess.TimeoutExpired:
            self.kill_engine()
            return None

    def engine_log_tail(self, lines: int = 12) -> list[str]:
        try:
            text = (self.tmp / "engine.log").read_text(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def engine_log_problems(self, limit: int = 12) -> list[str]:
        """The distinct lines of `up`'s output that report an error or a traceback."""
        try:
            lines = (self.tmp / "engine.log").read_text(errors="replace").splitlines()
        except OSError:
            return []
        words = ("Traceback", "Error", "ERROR", "error:", "WARNING")
        found: dict[str, None] = {}
        for line in lines:
            if any(w in line for w in words):
                found.setdefault(line.strip()[:200], None)
        return list(found)[:limit]

    def keep_logs(self, into: Path) -> None:
        """Copy `up`'s output and the children's logs into `into` (for a post-mortem)."""
        into.mkdir(parents=True, exist_ok=True)
        for name in ("engine.log", "engine-second.log"):
            with contextlib.suppress(OSError):
                shutil.copy(self.tmp / name, into / name)
        with contextlib.suppress(OSError):
            shutil.copytree(self.store_dir / "logs", into / "logs", dirs_exist_ok=True)

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "setpoint", *args],
            cwd=self.base, env=self.env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip

    # -- the store's disk

    def store_readonly(self) -> str | None:
        """Make the store directory read-only; None, or why it could not be done.

        A remount of the tmpfs is refused (EBUSY) while files are open for writing, which
        SQLite's always are; then a read-only bind mount of the directory is put over it:
        every open, create and rename through the path fails with EROFS, while descriptors
        opened before keep writing."""
        if self.mounted is not None:
            return self.mounted
        remount = _run("mount", "-o", "remount,ro", str(self.store_dir))
        if remount.returncode == 0:
            self.readonly_how = "remount"
            self.readonly_done.add("tmpfs remounted read-only")
            return None
        bind = _run("mount", "--bind", str(self.store_dir), str(self.store_dir))
        if bind.returncode != 0:
            return f"mount --bind failed: {bind.stderr.strip()}"
        self.readonly_how = "bind"
        ro = _run("mount", "-o", "remount,bind,ro", str(self.store_dir))
        if ro.returncode != 0:
            self.store_writable()
            return f"remount,bind,ro failed: {ro.stderr.strip()}"
        refused = (remount.stderr.strip().splitlines() or ["?"])[0]
        self.readonly_done.add(
            f"read-only bind mount over the store dir (remount ro refused: {refused}): "
            "new opens, creates and renames fail with EROFS; open descriptors still write"
        )
        return None

    def store_writable(self) -> None:
        if self.readonly_how == "remount":
            _run("mount", "-o", "remount,rw", str(self.store_dir))
        elif self.readonly_how == "bind":
            _run("umount", "-l", str(self.store_dir))  # lazily: a reader may hold it open
        self.readonly_how = None

    def store_full(self) -> str | None:
        """Fill the store's tmpfs to the last byte; None, or why it could not be done."""
        if self.mounted is not None:
            return self.mounted
        self.filler = self.store_dir / ".chaos-filler"
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            stats = os.statvfs(self.store_dir)
            size = stats.f_bavail * stats.f_frsize
            while size >= 4096:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError:
                    size //= 2
                    continue
                break
            with contextlib.suppress(OSError):  # and the crumbs
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        return None

    def store_not_full(self) -> None:
        if self.filler is not None:
            with contextlib.suppress(FileNotFoundError):
                self.filler.unlink()
            self.filler = None

    # -- what is left

    def ours(self, procs: dict[int, ProcInfo]) -> list[ProcInfo]:
        """The processes of this world: working in or naming the temp dir, engine included."""
        where = str(self.tmp)
        return [p for p in procs.values() if p.cwd.startswith(where) or where in p.cmdline]

    def kill_leftovers(self) -> list[ProcInfo]:
        """SIGKILL every process of this world (SIGCONT first); what was found."""
        left = self.ours(all_processes())
        for info in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(info.pid, signal.SIGCONT)
                os.kill(info.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.ours(all_processes()):
            time.sleep(0.1)
        return left

    def teardown(self) -> None:
        """Undo everything, whatever state the run stopped in: resume stopped processes,
        release ports, give the disk back, stop the engine (SIGKILL after ENGINE_STOP_S),
        kill what is left, unmount, remove the directory."""
        for pid in self.stopped_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.stopped_pids.clear()
        for sock in self.strangers:
            sock.close()
        self.strangers.clear()
        self.store_writable()
        self.store_not_full()
        for second in self.second_engines:
            if second.poll() is None:
                second.kill()
                second.wait()
        if self.engine_alive():
            progress("clean-up: stopping the engine")
            self.stop_engine()
        if left := self.kill_leftovers():
            progress(f"clean-up: killed {len(left)} processes left behind")
        if self._engine_log is not None:
            self._engine_log.close()
        if self.mounted is None:
            for _ in range(5):  # a bind mount left over sits on top of the tmpfs
                if _run("umount", str(self.store_dir)).returncode != 0:
                    break
            if os.path.ismount(self.store_dir):
                _run("umount", "-l", str(self.store_dir))
        shutil.rmtree(self.tmp, ignore_errors=True)
