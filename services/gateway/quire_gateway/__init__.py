"""The gateway: Quire's public API and BookKeeper's client role."""

# Before anything imports grpc: gRPC core reads its I/O settings once, at import.
import quire_common.grpc_runtime  # noqa: F401
