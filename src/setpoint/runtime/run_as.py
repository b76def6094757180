"""Who a workload's commands run as, and with what environment: one rule for a child, its
exec probes and an Autoscaler's command metric.

* `UserPolicy` says which users this engine may run commands as, and `UserPolicy.account`
  turns a spec's `user:` (None: the engine's own user) into the account to switch to
  (None: no switch), or raises `UserRefused` (`condition_reason` `UserUnknown` or `UserNotAllowed`,
  a message saying why and what to change). The rule:

  - the engine's own user (no `user:`, or `user:` naming it) needs no switch;
  - an engine that is not root cannot switch users, so any other user is refused;
  - an engine that is root may switch to any user of the machine, unless it was given an
    allow-list (`allowed`: `EngineSettings.allowed_users`, `setpoint up --allow-user`):
    then only the users on it, root itself (a Process without `user:`) included only if
    listed.

* `switch_to(account)`: the arguments of `asyncio.create_subprocess_exec` (and
  `subprocess.Popen`) that make a command that user: its uid and primary group, and no
  supplementary groups (not root's). Empty for None.
* `command_environment(account, env)`: the environment a command starts with: a few
  variables inherited from the engine (`INHERITED`: PATH, locale, TZ, TMPDIR, HOME,
  USER, LOGNAME), the engine's virtual environment as if activated (`setpoint.runtime.venv`),
  the account's HOME, USER and LOGNAME when it switches, then `env` over them. Never the
  rest of the engine's environment (its tokens and passwords).
* `user_of(obj)`: the `user:` an object's commands run as: `spec.user` (a Process, a Job)
  or `spec.template.spec.user` (a Deployment); None for anything else.

Reads the account database (`pwd`) and the engine's uid; starts nothing, decides nothing
about what a refusal means for an object (its controller does).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from setpoint.errors import Invalid, UserRefused
from setpoint.runtime.venv import activation

__all__ = [
    "INHERITED",
    "UserPolicy",
    "UserRefused",
    "command_environment",
    "switch_to",
    "user_of",
]

INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "HOME", "USER", "LOGNAME")
"""The engine's variables a command inherits (when they are set); nothing else of it."""


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _lookup(user: str | None) -> pwd.struct_passwd | None:
    """The account `user` names (None for None); `UserRefused` (`UserUnknown`) if none."""
    if user is None:
        return None
    try:
        return pwd.getpwnam(user)
    except KeyError:
        raise UserRefused(
            "UserUnknown", f"no user {user!r} on this machine: create it or change spec.user"
        ) from None


@dataclass(frozen=True, slots=True)
class UserPolicy:
    """Which users this engine may run commands as (see the module docstring).

    `allowed` None: the engine's own user, and any other when the engine is root."""

    allowed: frozenset[str] | None = None
    engine_uid: int = field(default_factory=lambda: os.geteuid())

    def __post_init__(self) -> None:
        if self.allowed is not None:
            object.__setattr__(self, "allowed", frozenset(self.allowed))

    @staticmethod
    def of(allowed: Iterable[str] | None) -> UserPolicy:
        """The policy of an allow-list, checked: each name is a user of this machine, and an
        engine that is not root lists no user but its own (it cannot switch). Raises
        `Invalid` naming `--allow-user` otherwise."""
        policy = UserPolicy(None if allowed is None else frozenset(allowed))
        me = _name_of(policy.engine_uid)
        for name in sorted(policy.allowed or ()):
            try:
                uid = pwd.getpwnam(name).pw_uid
            except KeyError:
                raise Invalid(f"no user {name!r} on this machine", field="--allow-user") from None
            if uid != policy.engine_uid and policy.engine_uid != 0:
                raise Invalid(
                    f"{name!r}: the engine runs as {me!r}, not root, and cannot switch users;"
                    " list no other user, or run the engine as root",
                    field="--allow-user",
                )
        return policy

    def account(self, user: str | None) -> pwd.struct_passwd | None:
        """The account to switch to for a spec's `user:` (None: run as the engine's own
        user); `UserRefused` if this engine may not run a command as it."""
        account = _lookup(user)
        uid = self.engine_uid if account is None else account.pw_uid
        name = _name_of(uid)
        if uid != self.engine_uid and self.engine_uid != 0:
            me = _name_of(self.engine_uid)
            raise UserRefused(
                "UserNotAllowed",
                f"cannot run as {name!r}: the engine runs as {me!r}, not root, and cannot"
                f" switch users; drop spec.user (to run as {me!r}) or run the engine as root",
            )
        if self.allowed is not None and not self._listed(uid):
            listed = ", ".join(sorted(self.allowed)) or "none"
            what = f"runs as {name!r}" + (" (no spec.user)" if user is None else "")
            raise UserRefused(
                "UserNotAllowed",
                f"{what}, which this engine does not allow (setpoint up --allow-user: {listed});"
                f" set spec.user to an allowed user, or start the engine with --allow-user {name}",
            )
        return None if uid == self.engine_uid else account

    def _listed(self, uid: int) -> bool:
        for name in self.allowed or ():
            try:
                if pwd.getpwnam(name).pw_uid == uid:
                    return True
            except KeyError:
                continue
        return False


def switch_to(account: pwd.struct_passwd | None) -> dict[str, Any]:
    """The subprocess arguments that run a command as `account` (None: as the engine)."""
    if account is None:
        return {}
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def command_environment(
    account: pwd.struct_passwd | None, env: Mapping[str, str] = {}
) -> dict[str, str]:
    """The complete environment of a command run as `account` with `env` (its spec's)."""
    result = {k: os.environ[k] for k in INHERITED if k in os.environ}
    result.update(activation(os.environ))  # the engine's virtual environment, as if activated
    if account is not None:
        result.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
    result.update(env)
    return result


def user_of(obj: Mapping[str, Any]) -> str | None:
    """The `user:` of a workload object: `spec.user`, or its template's; None if none."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    template = spec.get("template")
    if "user" not in spec and isinstance(template, Mapping):
        spec = template.get("spec")
        if not isinstance(spec, Mapping):
            return None
    user = spec.get("user")
    return user if isinstance(user, str) else None
