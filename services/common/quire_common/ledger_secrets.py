"""What a ledger record keeps of the ledger password, and how it is used.

etcd holds a salted PBKDF2 hash (to check a password at open) and the two
keys derived from the password that writing and reading need: the bookies'
master key and, for HMAC ledgers, the digest key. Records written before
these existed carry the plaintext password instead; every function here
accepts both, and `seal` turns the old form into the new one.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from quire_common.entry import Digester, DigestType, mac_key, master_key
from quire_proto.common.v1 import common_pb2

# Guessing a password costs no more than the fastest thing a record holds,
# and the bookie master key beside the hash is one unsalted SHA-1 (the bookie
# protocol fixes it). 100,000 iterations cost 26 ms of CPU per create and per
# open on a 2-core machine and bought nothing against that; 1,000 cost 0.3 ms.
# Each record keeps its own count, so a protocol without the SHA-1 key can
# raise it (docs/decisions.md).
PASSWORD_HASH_ITERATIONS = 1_000
_SALT_BYTES = 16


def _hash(password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password, salt, iterations)


def password_hash_iterations(password: bytes) -> int:
    """How many PBKDF2 iterations a new record's password hash gets. The empty
    password (a ledger created without one) is everyone's: stretching it
    slows no guesser down and cost each create and open 0.3 ms, so its hash
    takes one iteration (each record keeps its own count)."""
    return PASSWORD_HASH_ITERATIONS if password else 1


def slow_to_check(metadata: common_pb2.LedgerMetadata) -> bool:
    """Whether checking a password against this record stretches it (run it
    off the event loop then)."""
    return metadata.HasField("secrets") and metadata.secrets.password_iterations > 1


def needs_sealing(metadata: common_pb2.LedgerMetadata, keep_password: bool = False) -> bool:
    """No secrets yet (a plaintext password, or a record with neither form:
    its password is empty), or a plaintext password that is not to be kept."""
    if not metadata.HasField("secrets"):
        return True
    return bool(metadata.password) and not keep_password


def seal(metadata: common_pb2.LedgerMetadata, *, keep_password: bool = False) -> None:
    """Give the record its secrets and drop the plaintext password, in place,
    when `needs_sealing` (slow for a password: run it off the event loop). `keep_password`
    leaves the password beside the secrets, for gateways of the previous
    version during an upgrade (QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS)."""
    if not needs_sealing(metadata, keep_password):
        return
    password = metadata.password
    salt = os.urandom(_SALT_BYTES)
    iterations = password_hash_iterations(password)
    secrets = common_pb2.LedgerSecrets(
        password_salt=salt,
        password_iterations=iterations,
        password_hash=_hash(password, salt, iterations),
        master_key=master_key(password),
        mac_key=mac_key(password) if metadata.digest_type == DigestType.HMAC else b"",
    )
    metadata.secrets.CopyFrom(secrets)
    if not keep_password:
        metadata.ClearField("password")


def password_matches(metadata: common_pb2.LedgerMetadata, password: bytes) -> bool:
    """Whether `password` is the ledger's (slow on a sealed record: run it off the event loop)."""
    if not metadata.HasField("secrets"):
        return hmac.compare_digest(metadata.password, password)
    secrets = metadata.secrets
    candidate = _hash(password, secrets.password_salt, secrets.password_iterations)
    return hmac.compare_digest(candidate, secrets.password_hash)


def ledger_master_key(metadata: common_pb2.LedgerMetadata) -> bytes:
    if metadata.HasField("secrets"):
        return metadata.secrets.master_key
    return master_key(metadata.password)


def ledger_digester(metadata: common_pb2.LedgerMetadata) -> Digester:
    """The digester of the ledger's entries."""
    kind = metadata.digest_type or DigestType.CRC32C
    if metadata.HasField("secrets"):
        return Digester(kind, key=metadata.secrets.mac_key)
    return Digester(kind, metadata.password)


def without_secrets(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata:
    """A copy with neither form of the password, for anything shown to clients."""
    copy = common_pb2.LedgerMetadata()
    copy.CopyFrom(metadata)
    copy.ClearField("password")
    copy.ClearField("secrets")
    return copy
