"""Typed results: small frozen dataclasses built from the gateway's answers,
with ledger ids already parsed into `LedgerId` and enums as Python enums.
The asyncio client (quire_client.aio) returns these; a program on the sync
client can build them from its protobuf answers with `from_proto`."""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from quire_api.ids import LedgerId
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2


class LedgerState(enum.Enum):
    """Where a ledger is in its life cycle."""

    UNSPECIFIED = common_pb2.LEDGER_STATE_UNSPECIFIED
    OPEN = common_pb2.LEDGER_STATE_OPEN
    IN_RECOVERY = common_pb2.LEDGER_STATE_IN_RECOVERY
    CLOSED = common_pb2.LEDGER_STATE_CLOSED


class DigestType(enum.Enum):
    """How each entry of a ledger is checksummed."""

    UNSPECIFIED = common_pb2.DIGEST_TYPE_UNSPECIFIED
    CRC32 = common_pb2.DIGEST_TYPE_CRC32
    HMAC = common_pb2.DIGEST_TYPE_HMAC
    CRC32C = common_pb2.DIGEST_TYPE_CRC32C
    DUMMY = common_pb2.DIGEST_TYPE_DUMMY


E = TypeVar("E", bound=enum.Enum)


def _enum_member(kind: type[E], number: int, unknown: E) -> E:
    """The member numbered `number`, or `unknown` for a number a newer
    service sends that this client does not know yet."""
    try:
        return kind(number)
    except ValueError:
        return unknown


@dataclass(frozen=True, slots=True)
class Ensemble:
    """The bookies that store entries from `first_entry_id` on."""

    first_entry_id: int
    bookie_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LedgerOwner:
    """The gateway that writes a ledger: its name and where it is reached."""

    gateway: str
    address: str


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    """A ledger's record: its id, quorums, state and ensembles. For a CLOSED
    ledger `last_entry_id` and `length` are final; otherwise -1 and 0."""

    ledger_id: LedgerId
    state: LedgerState
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    digest_type: DigestType
    last_entry_id: int
    length: int
    ensembles: tuple[Ensemble, ...]
    custom_metadata: Mapping[str, str]
    create_time: datetime.datetime | None
    owner: LedgerOwner | None

    @property
    def closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @classmethod
    def from_proto(cls, message: common_pb2.LedgerMetadata) -> LedgerMetadata:
        owner = message.owner if message.HasField("owner") else None
        return cls(
            ledger_id=LedgerId(message.ledger_id.scope_id, message.ledger_id.ledger_id),
            state=_enum_member(LedgerState, message.state, LedgerState.UNSPECIFIED),
            ensemble_size=message.ensemble_size,
            write_quorum_size=message.write_quorum_size,
            ack_quorum_size=message.ack_quorum_size,
            digest_type=_enum_member(DigestType, message.digest_type, DigestType.UNSPECIFIED),
            last_entry_id=message.last_entry_id,
            length=message.length,
            ensembles=tuple(Ensemble(e.first_entry_id, tuple(e.bookie_ids)) for e in message.ensembles),
            custom_metadata=MappingProxyType(dict(message.custom_metadata)),
            create_time=message.create_time.ToDatetime(datetime.UTC) if message.HasField("create_time") else None,
            owner=LedgerOwner(owner.gateway, owner.address) if owner is not None else None,
        )


@dataclass(frozen=True, slots=True)
class OpenedLedger:
    """What opening a ledger answers: its metadata and its last add confirmed
    (for a closed ledger, its last entry)."""

    metadata: LedgerMetadata
    last_add_confirmed: int

    @classmethod
    def from_proto(cls, message: ledger_pb2.OpenLedgerResponse) -> OpenedLedger:
        return cls(LedgerMetadata.from_proto(message.metadata), message.last_add_confirmed)


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry: its id, payload, and the ledger's length up to and including it."""

    entry_id: int
    payload: bytes
    length: int

    @classmethod
    def from_proto(cls, message: ledger_pb2.Entry) -> Entry:
        return cls(message.entry_id, message.payload, message.length)


@dataclass(frozen=True, slots=True)
class AppendAck:
    """Entries `first_entry_id`..`last_entry_id` of a write session are
    confirmed; `last_add_confirmed` is the ledger's LAC after them."""

    first_entry_id: int
    last_entry_id: int
    last_add_confirmed: int
