"""Python client, command line and local cluster runner for Quire."""

from quire_client.client import (
    AbortedError,
    AlreadyExistsError,
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
    UnavailableError,
)

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
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
    "UnavailableError",
]
