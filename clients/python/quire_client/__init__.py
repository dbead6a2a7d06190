"""Python client, command line and local cluster runner for Quire."""

from quire_client.client import QuireClient, QuireClientError

__all__ = ["QuireClient", "QuireClientError"]
