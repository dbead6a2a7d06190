"""The registry service: the only process that talks to etcd."""

# Before anything imports grpc: gRPC core reads its I/O settings once, at import.
import quire_common.grpc_runtime  # noqa: F401
