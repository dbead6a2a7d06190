"""Python client, command line and local cluster runner for Quire.

QuireClient is the application's (ledgers and blobs), QuireAdmin the operator's."""

from quire_client.admin import QuireAdmin
from quire_client.client import (
    AbortedError,
    AlreadyExistsError,
    ClientTls,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    LedgerWriter,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    QuireClient,
    QuireClientError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
)

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "ClientTls",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "LedgerWriter",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "QuireAdmin",
    "QuireClient",
    "QuireClientError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
]
