"""Evidence read from outside the bookie: an strace log audited for acks that
precede the sync covering them (DUR-4), and RocksDB's WAL record framing, to
tear the last record of a WAL file (DUR-6).

The strace audit needs `strace -f -qq -yy -xx -s <big>`: every syscall's fd
with its path (or socket endpoints), every buffer in hex. From it:

- a WAL append is a `write` to a `*.log` file; RocksDB's WAL framing (a 7-byte
  header at the start of every 32 KiB block) is stripped so an entry's key is
  found whole;
- a sync is a completed `fdatasync`/`fsync` of that same file (the bookie syncs
  through its own descriptor, so files are matched by path, not fd);
- an ack is a gRPC AddEntriesResponse in the HTTP/2 DATA frames the bookie
  sends (`sendmsg` on a connection to its own port), decoded with the proto,
  or an OK AddResult (or an id in stored_add_ids) on an AddStream: its add_id is matched to the StreamedAdd
  the bookie received on the same connection and stream (`recvmsg`), which
  names the entries.

An entry's ack is covered when some sync of the WAL file that holds its key
started after the write holding the key's last byte returned, and returned
before the response's `sendmsg` began. Event order is the order of strace's
lines: a traced thread stays stopped until strace has printed its event, so
causally later events are printed later.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from quire_api.ids import LedgerId
from quire_bookie.storage import WAL_BLOCK_BYTES, WAL_HEADER_BYTES
from quire_proto.bookie.v1 import bookie_pb2

_FIRST_FRAGMENT_TYPES = (1, 2)  # kFullType, kFirstType

_LINE = re.compile(r"^(\d+)\s+\S+\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((\d+)<(.*?)>(?=[,)]| <unfinished)(.*)$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_RESULT = re.compile(r"\)\s+=\s+(-?\d+)")
_STRING = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _name(text: str) -> str:
    """A -xx fd annotation: hex-escaped path, or socket text left as is."""
    return _hex(text).decode(errors="replace") if text.startswith("\\x") else text


@dataclass
class _WalFile:
    offset: int  # file offset of the next byte written
    stripped: bytearray = field(default_factory=bytearray)  # file bytes without block headers
    # (stripped end offset, completion seq) of each write, in order
    writes: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class AckAudit:
    acks: int = 0  # entry acks seen in responses (the sample)
    acks_without_prior_sync: int = 0
    acks_without_wal_write: int = 0  # acks whose key was not seen written after tracing began
    violations: list[str] = field(default_factory=list)
    wal_writes: int = 0
    wal_syncs: int = 0
    responses: int = 0


def audit_acks(
    trace: Path, ledger: LedgerId, bookie_port: int, initial_wal_sizes: dict[str, int], entries: int
) -> AckAudit:
    """Audit an strace log of one bookie for acks of `ledger`'s entries
    (ids < `entries`) sent before a sync covering them. `initial_wal_sizes`:
    the size of each WAL file when tracing began (RocksDB only appends)."""
    audit = AckAudit()
    wal: dict[str, _WalFile] = {}
    syncs: dict[str, list[tuple[int, int]]] = {}  # path -> (entry seq, completion seq)
    sent: dict[str, bytearray] = {}  # connection -> bytes not yet parsed into frames
    messages: dict[tuple[str, int], bytearray] = {}  # (connection, stream) -> gRPC message bytes
    acked_at: dict[int, int] = {}  # entry id -> seq of the sendmsg carrying its first ack
    pending: dict[int, tuple[str, str, str, int]] = {}  # pid -> (call, fd name, args, entry seq)
    port_marker = f":{bookie_port}->"

    received: dict[str, bytearray] = {}  # connection -> bytes the bookie read, not yet parsed
    requests: dict[tuple[str, int], bytearray] = {}  # (connection, stream) -> gRPC message bytes
    streamed: dict[tuple[str, int, int], list[int]] = {}  # (connection, stream, add_id) -> entry ids

    def frames(
        buffer: bytearray, partial: dict[tuple[str, int], bytearray], connection: str
    ) -> list[tuple[int, bytes]]:
        """Whole gRPC messages (stream id, body) in the HTTP/2 DATA frames buffered so far."""
        found: list[tuple[int, bytes]] = []
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[:3], "big")
            if len(buffer) < 9 + length:
                break
            kind, flags = buffer[3], buffer[4]
            stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
            payload = bytes(buffer[9 : 9 + length])
            del buffer[: 9 + length]
            if kind != 0:  # DATA only
                continue
            if flags & 0x8 and payload:  # PADDED
                payload = payload[1 : len(payload) - payload[0]]
            message = partial.setdefault((connection, stream), bytearray())
            message += payload
            while len(message) >= 5 and len(message) >= 5 + int.from_bytes(message[1:5], "big"):
                size = int.from_bytes(message[1:5], "big")
                found.append((stream, bytes(message[5 : 5 + size])))
                del message[: 5 + size]
        return found

    def on_sendmsg(connection: str, args: str, seq: int) -> None:
        data = b"".join(_hex(m) for m in re.findall(r'iov_base="((?:\\x[0-9a-f]{2})*)"', args))
        buffer = sent.setdefault(connection, bytearray())
        buffer += data
        for stream, body in frames(buffer, messages, connection):
            if not on_stream_results(connection, stream, body, seq):
                on_response(body, seq)

    def on_recvmsg(connection: str, args: str, result: int) -> None:
        data = b"".join(_hex(m) for m in re.findall(r'iov_base="((?:\\x[0-9a-f]{2})*)"', args))[: max(result, 0)]
        buffer = received.setdefault(connection, bytearray())
        buffer += data
        if buffer.startswith(_HTTP2_PREFACE):
            del buffer[: len(_HTTP2_PREFACE)]
        for stream, body in frames(buffer, requests, connection):
            try:
                request = bookie_pb2.AddStreamRequest.FromString(body)
            except Exception:
                continue
            for add in request.adds:
                if add.add_id and LedgerId(add.ledger_id.scope_id, add.ledger_id.ledger_id) == ledger:
                    streamed[(connection, stream, add.add_id)] = [entry.entry_id for entry in add.entries]

    def on_stream_results(connection: str, stream: int, body: bytes, seq: int) -> bool:
        """Acks in an AddStreamResponse on a stream whose adds were seen; False if it is not one."""
        if not any(key[0] == connection and key[1] == stream for key in streamed):
            return False
        try:
            response = bookie_pb2.AddStreamResponse.FromString(body)
        except Exception:
            return False
        audit.responses += 1
        stored = [*response.stored_add_ids, *(result.add_id for result in response.results if result.code == 0)]
        for result in response.results:
            if result.code != 0:
                streamed.pop((connection, stream, result.add_id), None)
        for add_id in stored:
            for entry_id in streamed.pop((connection, stream, add_id), []):
                if 0 <= entry_id < entries:
                    acked_at.setdefault(entry_id, seq)
        return True

    def on_response(body: bytes, seq: int) -> None:
        if not body.startswith(b"\x0a"):  # AddEntriesResponse: packed entry_ids, field 1
            return
        try:
            ids = list(bookie_pb2.AddEntriesResponse.FromString(body).entry_ids)
        except Exception:
            return
        if not ids or any(not 0 <= i < entries for i in ids) or ids != list(range(ids[0], ids[0] + len(ids))):
            return
        audit.responses += 1
        for entry_id in ids:
            acked_at.setdefault(entry_id, seq)

    def on_write(path: str, args: str, result: int, seq: int) -> None:
        match = _STRING.search(args)
        if match is None or result <= 0:
            return
        data = _hex(match.group(1))[:result]
        state = wal.setdefault(path, _WalFile(initial_wal_sizes.get(path, 0)))
        for byte_index in range(0, len(data)):  # drop the header at every block start
            offset = state.offset + byte_index
            if offset % WAL_BLOCK_BYTES >= WAL_HEADER_BYTES:
                state.stripped.append(data[byte_index])
        state.offset += len(data)
        state.writes.append((len(state.stripped), seq))
        audit.wal_writes += 1

    def complete(call: str, name: str, args: str, result: int, entry_seq: int, seq: int) -> None:
        if call == "recvmsg":
            if port_marker in name:
                on_recvmsg(name, args, result)
            return
        if call == "write" and name.endswith(".log"):
            on_write(name, args, result, seq)
        elif call in ("fdatasync", "fsync") and name.endswith(".log") and result == 0:
            syncs.setdefault(name, []).append((entry_seq, seq))
            audit.wal_syncs += 1

    with trace.open(errors="replace") as lines:
        for seq, line in enumerate(lines):
            head = _LINE.match(line.rstrip("\n"))
            if head is None:
                continue
            pid, body = int(head.group(1)), head.group(2)
            resumed = _RESUMED.match(body)
            if resumed is not None:
                started = pending.pop(pid, None)
                result = _RESULT.search(resumed.group(2))
                if started is not None and result is not None and started[0] == resumed.group(1):
                    syscall, name, args, entry_seq = started
                    if syscall == "recvmsg":  # the data read is printed when the call returns
                        args = resumed.group(2)
                    complete(syscall, name, args, int(result.group(1)), entry_seq, seq)
                continue
            call = _CALL.match(body)
            if call is None:
                continue
            name, args = _name(call.group(3)), call.group(4)
            if call.group(1) == "sendmsg":
                if port_marker in name:
                    on_sendmsg(name, args, seq)  # an ack counts from the call's start
                continue
            if body.endswith("<unfinished ...>"):
                pending[pid] = (call.group(1), name, args, seq)
                continue
            result = _RESULT.search(args)
            if result is not None:
                complete(call.group(1), name, args, int(result.group(1)), seq, seq)

    for entry_id, ack_seq in sorted(acked_at.items()):
        audit.acks += 1
        key = ledger.key + entry_id.to_bytes(8, "big")
        written = _written_at(wal, key)
        if written is None:
            audit.acks_without_wal_write += 1
            continue
        path, write_seq = written
        if not any(write_seq < start and done < ack_seq for start, done in syncs.get(path, [])):
            audit.acks_without_prior_sync += 1
            if len(audit.violations) < 5:
                audit.violations.append(f"entry {entry_id}: written at line {write_seq}, acked at line {ack_seq}")
    return audit


def _written_at(wal: dict[str, _WalFile], key: bytes) -> tuple[str, int] | None:
    """The WAL file holding `key` and the seq of the write that completed it."""
    for path, state in wal.items():
        found = state.stripped.find(key)
        if found < 0:
            continue
        end = found + len(key)
        for stripped_end, seq in state.writes:
            if stripped_end >= end:
                return path, seq
    return None


def wal_record_starts(data: bytes) -> list[int]:
    """File offsets where the logical records (write batches) of a RocksDB WAL
    file begin, up to the first header that is not a record (the end)."""
    starts: list[int] = []
    offset = 0
    while offset + WAL_HEADER_BYTES <= len(data):
        left_in_block = WAL_BLOCK_BYTES - offset % WAL_BLOCK_BYTES
        if left_in_block < WAL_HEADER_BYTES:  # the block's zero trailer
            offset += left_in_block
            continue
        _, length, kind = struct.unpack_from("<IHB", data, offset)
        if kind == 0 or length > left_in_block - WAL_HEADER_BYTES:
            break
        if kind in _FIRST_FRAGMENT_TYPES:
            starts.append(offset)
        offset += WAL_HEADER_BYTES + length
    return starts
