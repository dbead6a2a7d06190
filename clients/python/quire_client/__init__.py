"""Python client, command line and local cluster runner for Quire."""

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
    "QuireClient",
    "QuireClientError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
]
