"""The part of etcd's v3 gRPC API that `setpoint.store.etcd` speaks: setpoint's own
description of it (mvccpb.proto, etcdserverpb.proto: etcd's package, service, method and
message names and field numbers, only the messages used) and the Python that grpcio-tools
generates from those files (`*_pb2.py`, `*_pb2.pyi`, `etcdserverpb_pb2_grpc.py`), committed.

Never edit the generated modules: change a .proto file, then regenerate them with
`./dev run python tests/store/test_etcd_api.py` (grpcio-tools at the version uv.lock pins);
that test fails when they are not exactly what the .proto files generate. They need grpcio
and protobuf (the `setpoint[etcd]` extra) at least at the versions they were generated with
(they check when imported). This package holds no code of its own.
"""
