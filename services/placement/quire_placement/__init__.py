"""The placement service: chooses ensembles."""

# Before anything imports grpc: gRPC core reads its I/O settings once, at import.
from quire_common import grpc_runtime  # noqa: F401
