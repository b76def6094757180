"""The Python of `setpoint.store.etcd_api` is what grpcio-tools, at the version uv.lock pins,
makes of the .proto files beside it, byte for byte: the committed modules cannot drift from
the description they say they come from. Run as a script, it writes them:

    ./dev run python tests/store/test_etcd_api.py
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
API = SRC / "setpoint" / "store" / "etcd_api"
SERVICES = {"etcdserverpb.proto"}
"""The .proto files that declare services (they get a `_pb2_grpc` module as well)."""
HEADER = (
    "# setpoint: generated from setpoint/store/etcd_api/{proto} by grpcio-tools {version}\n"
    "# (`./dev run python tests/store/test_etcd_api.py`, which the tests check): do not edit.\n"
)


def generated_files(directory: Path) -> dict[str, bytes]:
    """name -> content of the generated modules in `directory`."""
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"))
    }


def generate(into: Path) -> dict[str, bytes]:
    """Generate the modules from the .proto files into `into` (a tree like src/); name ->
    content, each with a header naming its source and the grpcio-tools version."""
    version = importlib.metadata.version("grpcio-tools")
    protos = sorted(path.name for path in API.glob("*.proto"))
    for proto in protos:
        outputs = [f"--python_out={into}", f"--pyi_out={into}"]
        if proto in SERVICES:
            outputs.append(f"--grpc_python_out={into}")
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}", *outputs, str(API / proto)],
            check=True,
            timeout=120,
        )
    out = into / API.relative_to(SRC)
    files = generated_files(out)
    for name, content in files.items():
        proto = name.split("_pb2")[0] + ".proto"
        assert proto in protos, name
        files[name] = HEADER.format(proto=proto, version=version).encode() + content
        (out / name).write_bytes(files[name])
    return files


def test_the_committed_modules_are_what_the_proto_files_generate(tmp_path: Path) -> None:
    fresh, committed = generate(tmp_path), generated_files(API)
    assert sorted(fresh) == sorted(committed)
    differ = [name for name in fresh if fresh[name] != committed[name]]
    assert not differ, f"regenerate: ./dev run python tests/store/test_etcd_api.py ({differ})"


def test_the_generated_modules_name_etcds_methods() -> None:
    """The wire names are etcd's: `/etcdserverpb.KV/Range` is the method etcd serves."""
    from setpoint.store.etcd_api import etcdserverpb_pb2, mvccpb_pb2

    kv = etcdserverpb_pb2.DESCRIPTOR.services_by_name["KV"]
    assert kv.full_name == "etcdserverpb.KV"
    assert {m.name for m in kv.methods} == {"Range", "Put", "DeleteRange", "Txn", "Compact"}
    watch = etcdserverpb_pb2.DESCRIPTOR.services_by_name["Watch"].methods_by_name["Watch"]
    assert (watch.client_streaming, watch.server_streaming) == (True, True)
    assert mvccpb_pb2.KeyValue.DESCRIPTOR.full_name == "mvccpb.KeyValue"


if __name__ == "__main__":
    generate(SRC)
