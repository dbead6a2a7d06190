"""The bookie service: durable entry storage in RocksDB."""

# Before anything imports grpc: gRPC core reads its I/O settings once, at import.
import quire_common.grpc_runtime  # noqa: F401
