"""The placement service: chooses ensembles."""

# Before anything imports grpc: gRPC core reads its I/O settings once, at import.
import quire_common.grpc_runtime  # noqa: F401
