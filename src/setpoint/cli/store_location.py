"""Where the CLI's store is, decided in this one place (`locate`), first match wins:

1. `--store URL` (a `memory://`, `sqlite:` or `http(s)://` store);
2. `--server URL`: an API server (`setpoint serve`), with `--token`, or the token of the
   kubeconfig below when its current context names that same server;
3. `$SETPOINT_STORE`;
4. the nearest of the current directory and its parents that has a `.setpoint/` directory,
   as git finds `.git`: its `state.db`, or, when it holds a `kubeconfig` and no `state.db`,
   the server that kubeconfig names;
5. `$KUBECONFIG` (its first file that exists): the server of its current context;
6. `DEFAULT_STORE` (relative to the cwd).

A local `.setpoint/` comes before `$KUBECONFIG` on purpose: a kubeconfig set for a
Kubernetes cluster must not turn `setpoint get` in a project directory into a call to that
cluster. A `.setpoint/` found (not named) is used only if it belongs to the user running
setpoint, as git refuses another user's repository (CVE-2022-24765): otherwise `Invalid`
says so, and `--store` or `SETPOINT_STORE` name it if it is to be trusted.
A kubeconfig others may write is refused, and so is a found one of another user; a
`tokenFile` is read only if it is the caller's and no one else may write it. A server's
token is `--token`, else its kubeconfig user's `token` (or `tokenFile`); its client
certificate is the user's `client-certificate(-data)` and `client-key(-data)` (a key file
is read as a token file is); a kubeconfig context's `namespace` becomes the default
namespace.

Kept apart so that `setpoint --help` can name the default without importing the store;
paths are strings (`os.path`: pathlib costs a command's start more than it saves here).
Reads only whether directories exist and kubeconfig files (YAML is imported only then); no
printing.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `--help` needs none
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

STORE_DIR = ".setpoint"
STORE_FILE = "state.db"
KUBECONFIG_FILE = "kubeconfig"
DEFAULT_STORE = f"sqlite:///{STORE_DIR}/{STORE_FILE}"
"""The store when neither --store nor SETPOINT_STORE says otherwise and no `.setpoint/`
is found in the current directory or a parent (relative to the cwd)."""


class Location:
    """Where the store is: its URL, where a `.setpoint/` was looked for and not found
    (empty when the store was named or found), and for a server the credentials and the
    kubeconfig's namespace. (A plain class: `dataclasses` costs `--help` too much.)"""

    __slots__ = (
        "ca_data",
        "ca_file",
        "client_cert",
        "client_key",
        "insecure",
        "namespace",
        "searched",
        "source",
        "token",
        "url",
    )

    def __init__(
        self,
        url: str,
        searched: tuple[str, ...] = (),
        *,
        token: str | None = None,
        source: str = "",
        ca_data: str | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        namespace: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
    ) -> None:
        self.url = url
        self.searched = searched
        self.token = token
        self.source = source
        """Where the token and server came from (`--token`, a kubeconfig's path)."""
        self.ca_data = ca_data
        self.ca_file = ca_file
        self.insecure = insecure
        self.namespace = namespace
        self.client_cert = client_cert
        """The client certificate (PEM) to present, and its key (`client_key`, PEM)."""
        self.client_key = client_key

    @property
    def remote(self) -> bool:
        """The store is reached through an API server."""
        return self.url.startswith(("http://", "https://"))


def locate(
    store: str | None,
    server: str | None,
    token: str | None,
    environ: Mapping[str, str],
    start: str,
) -> Location:
    """The store to use, from --store, --server, --token, the environment and the absolute
    directory `start`; see the module docstring for the order."""
    if store:
        return Location(store, token=token, source="--token" if token else "")
    if server:
        found = _kubeconfig_for(environ, start)
        if token or found is None or found.url.rstrip("/") != server.rstrip("/"):
            return Location(server, token=token, source="--token" if token else "")
        return found
    if environ.get("SETPOINT_STORE"):
        return Location(environ["SETPOINT_STORE"], token=token, source="--token" if token else "")
    directory, searched = _find_dir(start)
    if directory is not None:
        kubeconfig = os.path.join(directory, KUBECONFIG_FILE)
        if not os.path.exists(os.path.join(directory, STORE_FILE)) and os.path.isfile(kubeconfig):
            return _with_token(read_kubeconfig(kubeconfig, discovered=True), token)
        return Location(f"sqlite:///{os.path.join(directory, STORE_FILE)}")
    for path in environ.get("KUBECONFIG", "").split(os.pathsep):
        if path and os.path.isfile(path):
            return _with_token(read_kubeconfig(path), token)
    return Location(DEFAULT_STORE, searched)


def _with_token(location: Location, token: str | None) -> Location:
    if token:
        location.token, location.source = token, "--token"
    return location


def _kubeconfig_for(environ: Mapping[str, str], start: str) -> Location | None:
    """The server a kubeconfig names (a found `.setpoint/kubeconfig`, else `$KUBECONFIG`)."""
    directory, _ = _find_dir(start, strict=False)
    if directory and os.path.isfile(os.path.join(directory, KUBECONFIG_FILE)):
        return read_kubeconfig(os.path.join(directory, KUBECONFIG_FILE), discovered=True)
    for path in environ.get("KUBECONFIG", "").split(os.pathsep):
        if path and os.path.isfile(path):
            return read_kubeconfig(path)
    return None


def _find_dir(start: str, *, strict: bool = True) -> tuple[str | None, tuple[str, ...]]:
    """The nearest `.setpoint/` of `start` and its parents, and the directories searched.
    If it (or what its symbolic link names) is another user's: `Invalid`, or, not
    `strict`, none found (the search stops there: `--server` needs no kubeconfig)."""
    searched: list[str] = []
    directory = start
    while True:
        searched.append(directory)
        candidate = os.path.join(directory, STORE_DIR)
        if os.path.isdir(candidate):
            refusal = _foreign(candidate)
            if refusal is None:
                return candidate, tuple(searched)
            if not strict:
                return None, tuple(searched)
            from setpoint.errors import Invalid

            raise Invalid(refusal)
        parent = os.path.dirname(directory)
        if parent == directory:
            return None, tuple(searched)
        directory = parent


def _foreign(found: str) -> str | None:
    """Why the `.setpoint/` directory `found` is not to be used: it (or the link to it) is
    another user's. As git refuses another user's repository, another user's store or
    kubeconfig is never used unless it is named. None if it is the caller's."""
    owners = {os.lstat(found).st_uid, os.stat(found).st_uid} - {os.geteuid()}
    if not owners:
        return None
    return (
        f"{found} belongs to another user (uid {owners.pop()}, not {os.geteuid()}): "
        "refusing to use a store or kubeconfig they could have put there; name it with "
        "--store or SETPOINT_STORE if you trust it"
    )


def find_store(start: str) -> tuple[str | None, tuple[str, ...]]:
    """The URL of the store in `.setpoint/` of the absolute directory `start` or its nearest
    parent (None if no directory has one), and the directories searched, nearest first."""
    directory, searched = _find_dir(start)
    if directory is None:
        return None, searched
    return f"sqlite:///{os.path.join(directory, STORE_FILE)}", searched


def store_url_for(given: str | None, start: str) -> tuple[str, tuple[str, ...]]:
    """The store to use: `given` (from --store or SETPOINT_STORE) if any, else the one
    `find_store` finds, else `DEFAULT_STORE`; and where it was looked for (empty when
    `given` or found)."""
    if given:
        return given, ()
    found, searched = find_store(start)
    return (found, ()) if found else (DEFAULT_STORE, searched)


def read_kubeconfig(path: str, *, discovered: bool = False) -> Location:
    """The server, credentials and namespace of the current context of the kubeconfig at
    `path`; `Invalid` naming the file and the field when it cannot say, or when the file
    is one other users may change (another user's, if `discovered` in a `.setpoint/`;
    writable by group or other). A `tokenFile` is read only if it is the caller's and
    no one else may write it (`setpoint.files.read_secret`)."""
    import base64

    import yaml

    from setpoint.errors import Invalid

    try:
        with open(path, encoding="utf-8") as file:
            _check_kubeconfig_file(path, os.fstat(file.fileno()), discovered)
            config = yaml.safe_load(file)
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise Invalid(f"{path}: cannot read this kubeconfig: {exc}", field="kubeconfig") from None
    if not isinstance(config, dict):
        raise Invalid(f"{path}: not a kubeconfig (want a mapping)", field="kubeconfig")
    current = config.get("current-context")
    context = _named(config, "contexts", "context", current, path)
    cluster = _named(config, "clusters", "cluster", context.get("cluster"), path)
    user = _named(config, "users", "user", context.get("user"), path, required=False)
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise Invalid(f"{path}: the cluster of context {current!r} has no server", field="server")
    token = user.get("token")
    if not token and isinstance(user.get("tokenFile"), str):
        from setpoint.files import read_secret

        token_file = os.path.join(os.path.dirname(path), user["tokenFile"])
        try:
            token = read_secret(token_file, what="token file").strip()
        except OSError as exc:
            raise Invalid(f"{path}: tokenFile: {exc}", field="kubeconfig") from None
    ca_data = cluster.get("certificate-authority-data")
    ca_file = cluster.get("certificate-authority")
    client_cert = _pem(user, "client-certificate", path, secret=False)
    client_key = _pem(user, "client-key", path, secret=True)
    if (client_cert is None) != (client_key is None):
        raise Invalid(
            f"{path}: user of context {current!r}: give both a client certificate and its key",
            field="kubeconfig",
        )
    return Location(
        server,
        token=str(token) if token else None,
        source=path,
        ca_data=base64.b64decode(ca_data).decode() if isinstance(ca_data, str) else None,
        ca_file=os.path.join(os.path.dirname(path), ca_file) if isinstance(ca_file, str) else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        namespace=context.get("namespace") or None,
        client_cert=client_cert,
        client_key=client_key,
    )


def _pem(user: dict[str, Any], field: str, path: str, *, secret: bool) -> str | None:
    """The PEM text of a kubeconfig user's `FIELD-data` (base64) or `FIELD` (a file, relative
    to the kubeconfig; a `secret` one read only if it is the caller's and no one else may
    write it); None if it has neither."""
    import base64
    import binascii

    from setpoint.errors import Invalid
    from setpoint.files import read_secret

    data = user.get(f"{field}-data")
    if isinstance(data, str) and data:
        try:
            return base64.b64decode(data, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise Invalid(
                f"{path}: {field}-data: not base64 of a PEM file", field="kubeconfig"
            ) from None
    name = user.get(field)
    if not isinstance(name, str) or not name:
        return None
    file = os.path.join(os.path.dirname(path), name)
    try:
        if secret:
            return read_secret(file, what="client key file")
        with open(file, encoding="utf-8") as pem:
            return pem.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise Invalid(f"{path}: {field}: {exc}", field="kubeconfig") from None


def _check_kubeconfig_file(path: str, st: os.stat_result, discovered: bool) -> None:
    """`Invalid` if another user could have chosen what the kubeconfig at `path` says."""
    from setpoint.errors import Invalid

    if discovered and st.st_uid != os.geteuid():
        raise Invalid(
            f"{path}: belongs to another user (uid {st.st_uid}, not {os.geteuid()}): "
            "refusing to use it; name the server with --server and --token",
            field="kubeconfig",
        )
    if st.st_mode & 0o022:
        raise Invalid(
            f"{path}: other users may write this kubeconfig (mode {st.st_mode & 0o777:04o}): "
            f"refusing to use it; chmod go-w {path}",
            field="kubeconfig",
        )


def _named(
    config: dict[str, Any],
    section: str,
    key: str,
    name: Any,
    path: str,
    *,
    required: bool = True,
) -> dict[str, Any]:
    """The `key` mapping of the entry called `name` in the kubeconfig's list `section`."""
    from setpoint.errors import Invalid

    for entry in config.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else {}
    if not required:
        return {}
    raise Invalid(f"{path}: no {key} named {name!r} (current-context)", field="kubeconfig")
