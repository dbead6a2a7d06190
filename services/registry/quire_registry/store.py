"""The metadata store interface the registry is written against, and its etcd
implementation.

Everything the registry needs from etcd is here: versioned get, prefix listing,
create-if-absent, compare-and-swap on version, delete, leases and watches. The
client library (etcd3aio) is imported nowhere else, so replacing it touches
only this file. A version is the key's etcd mod_revision.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import etcd3aio
import grpc
from etcd3aio import prefix_range_end
from etcd3aio._protobuf import Compare, RequestOp, TxnResponse, WatchCreateRequest, WatchRequest, WatchResponse

from quire_api.backoff import Backoff
from quire_api.errors import QuireError, Reason, ResourceExhausted, Unavailable
from quire_common.channels import RECONNECT_OPTIONS
from quire_common.config import ConfigError
from quire_common.telemetry import duration_histogram, meter, tracer
from quire_registry.etcd_probe import check_tls_settings

log = logging.getLogger(__name__)

OPS_PER_TRANSACTION = 100  # in one transaction: etcd refuses more than 128 operations by default
_tracer = tracer(__name__)
_etcd_latency = duration_histogram(
    meter("quire.registry"), "quire.etcd.operation.duration", "Latency of etcd calls, by operation and outcome"
)

# A watch stream that failed (etcd restarting) is opened again after this, doubling up to the cap.
WATCH_RETRY = Backoff(first_seconds=0.25, longest_seconds=5.0)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    version: int  # mod_revision; 0 never occurs for a stored key
    lease_id: int = 0  # the lease the key is attached to; 0 for none
    writes: int = 0  # how often the key was written since it was created (etcd's per-key version)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    key: bytes
    value: bytes | None  # None for a delete
    version: int


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """What one watch response says: the events of one revision group, or
    none for a progress notification. Every change up to `revision` under the
    watched prefix has been delivered once this batch has."""

    revision: int
    events: list[WatchEvent]


class WatchCompacted(Exception):
    """The history a watch needed was compacted away; relist and watch again
    from the relist's revision."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"watch history compacted up to revision {compact_revision}")
        self.compact_revision = compact_revision


@dataclass(frozen=True, slots=True)
class Put:
    """One write of a multi-key transaction."""

    key: bytes
    value: bytes
    lease_id: int = 0
    # A counter other writers overwrite right after (the legacy id sequence):
    # not looked at when recognising a transaction's own commit.
    shared: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    """One delete of a multi-key transaction."""

    key: bytes


class MetadataStore(Protocol):
    async def get(self, key: bytes) -> KeyValue | None: ...

    async def list_prefix(
        self, prefix: bytes, *, start_after: bytes | None = None, limit: int = 0
    ) -> tuple[list[KeyValue], int]: ...

    async def list_keys(self, prefix: bytes, *, start_after: bytes | None = None, limit: int = 0) -> list[bytes]: ...

    async def create(self, key: bytes, value: bytes, lease_id: int = 0) -> int | None: ...

    async def compare_and_swap(self, key: bytes, value: bytes, expected_version: int) -> int | None: ...

    async def delete(self, key: bytes, expected_version: int = 0) -> bool: ...

    async def transact(
        self, absent: Sequence[bytes], versions: dict[bytes, int], ops: Sequence[Put | Delete]
    ) -> int | None: ...

    async def grant_lease(self, ttl_seconds: int) -> tuple[int, int]: ...

    async def keep_alive(self, lease_id: int) -> int: ...

    async def revoke_lease(self, lease_id: int) -> None: ...

    def watch_prefix(self, prefix: bytes, start_version: int) -> AsyncIterator[list[WatchEvent]]: ...

    def watch_changes(self, prefix: bytes, start_revision: int) -> AsyncIterator[WatchBatch]: ...

    async def current_revision(self) -> int: ...

    async def history_kept(self, revision: int) -> bool: ...

    async def close(self) -> None: ...


# Attempts of one write transaction: the first, and two more after a lost answer.
WRITE_ATTEMPTS = 3


def committed_already(ops: Sequence[Put | Delete], current: dict[bytes, KeyValue | None]) -> bool:
    """Whether a transaction whose compare failed, after an attempt whose
    answer was lost, finds its own commit: every key it writes holds the value
    (and lease) it wrote, and every key it deletes is gone. A value written by
    anyone else would have to be byte-identical (a ledger record carries its
    creation time and id, a registration its fresh lease), and then the store
    is as this write would have left it anyway."""
    checked = False
    for op in ops:
        kv = current.get(op.key)
        if isinstance(op, Delete):
            if kv is not None:
                return False
        elif op.shared:
            continue
        elif kv is None or kv.value != op.value or kv.lease_id != op.lease_id:
            return False
        checked = True
    return checked


async def _watch_requests(create: WatchCreateRequest, call_over: asyncio.Event) -> AsyncIterator[WatchRequest]:
    """A watch call's request stream: the create request, then open until the call is over."""
    yield WatchRequest(create_request=create)
    await call_over.wait()


def _details(exc: Exception) -> str:
    return exc.details() or str(exc) if isinstance(exc, grpc.aio.AioRpcError) else str(exc)


# In the debug string of grpc.aio's own INTERNAL error for a message sent on a call that had already failed.
_SEND_ON_A_FAILED_CALL = 'Failed "execute_batch"'


class _LeaseGone(Exception):
    """A transaction put a key on a lease etcd no longer has."""


def _is_lease_gone(exc: grpc.aio.AioRpcError) -> bool:
    """etcd's answer to a call naming a lease it no longer has: expired or revoked."""
    return exc.code() == grpc.StatusCode.NOT_FOUND and "lease not found" in (exc.details() or "")


def etcd_rpc_error(what: str, exc: grpc.aio.AioRpcError) -> QuireError | None:
    """An etcd call's gRPC failure that etcd3aio passes through, as a QuireError.
    RESOURCE_EXHAUSTED is etcd's space quota: the NOSPACE alarm is raised and
    etcd refuses every write until an operator compacts, defragments and
    disarms it. Retrying cannot help, and calling it "unavailable" would send
    the operator looking for a network fault."""
    details = _details(exc)
    if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted(
            f"etcd {what} refused: the etcd space alarm (NOSPACE) is raised ({details}); metadata writes fail "
            "until an operator frees space (compact, defragment, `etcdctl alarm disarm`) or raises "
            "--quota-backend-bytes",
            Reason.DISK_FULL,
        )
    if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(f"etcd {what} failed: {exc.code().name}: {details}", Reason.METADATA_STORE_UNAVAILABLE)
    if exc.code() == grpc.StatusCode.INTERNAL and _SEND_ON_A_FAILED_CALL in (exc.debug_error_string() or ""):
        # grpc.aio's own error for a message sent on a call that had already failed, as a lease
        # keep-alive's stream does when the connection to etcd breaks under it (grpc/grpc#24758):
        # the connection is lost, etcd said nothing.
        return Unavailable(f"etcd {what} failed: the connection broke", Reason.METADATA_STORE_UNAVAILABLE)
    return None  # anything else is a bug here, not a state of etcd


def _key_value(kv) -> KeyValue:  # type: ignore[no-untyped-def]
    return KeyValue(kv.key, kv.value, kv.mod_revision, kv.lease, kv.version)


def _is_credentials_error(exc: Exception) -> bool:
    """etcd answers a wrong password with INVALID_ARGUMENT ("authentication
    failed") and a request without a user on a cluster with authentication
    on with INVALID_ARGUMENT ("user name is empty"), which etcd3aio passes
    through as plain RPC errors."""
    if isinstance(exc, etcd3aio.errors.EtcdUnauthenticatedError):
        return True
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.FAILED_PRECONDITION,  # auth not enabled
    )


@dataclass(frozen=True)
class EtcdAccess:
    """How the registry proves itself to etcd: TLS (CA, and a client
    certificate for etcd's --client-cert-auth) and/or a user whose role is
    limited to the cluster's key prefix."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None
    user: str = ""
    password: str = ""


def resolve_endpoints(endpoints: Sequence[str]) -> tuple[list[str], str | None]:
    """`host:port` endpoints as IPv4 `address:port` (every address a name has),
    and the first name among them (None when all are addresses already)."""
    addresses: list[str] = []
    first_name: str | None = None
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        try:
            ipaddress.IPv4Address(host)
            addresses.append(endpoint)
            continue
        except ValueError:
            pass
        first_name = first_name or host
        infos = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)
        for info in infos:
            address = f"{info[4][0]}:{port}"
            if address not in addresses:
                addresses.append(address)
    return addresses, first_name


class EtcdStore:
    """MetadataStore on etcd v3 through etcd3aio (asyncio, grpc.aio)."""

    # etcd tokens live 5 minutes by default; renew well before.
    TOKEN_REFRESH_SECONDS = 120.0

    def __init__(
        self,
        endpoints: Sequence[str],
        timeout_seconds: float = 5.0,
        access: EtcdAccess | None = None,
        prefix: bytes = b"",
        recognise_own_commits: bool = True,
    ) -> None:
        self._access = access or EtcdAccess()
        # False only as the fault suite's positive control (QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK).
        self._recognise_own_commits = recognise_own_commits
        # etcd3aio dials an `ipv4:` target, which takes addresses only: names
        # (a Kubernetes Service) are resolved here, and TLS then checks the
        # certificate against the name dialled unless QUIRE_ETCD_SERVER_NAME says otherwise.
        self._resolve_error = ""
        try:
            addresses, dialled_name = resolve_endpoints(endpoints)
        except OSError as exc:
            addresses, dialled_name = list(endpoints), None
            self._resolve_error = f"cannot resolve {','.join(endpoints)}: {exc}"
        # Without a CA, etcd3aio opens a plaintext channel.
        self._client = etcd3aio.Etcd3Client(
            addresses,
            rpc_max_attempts=3,
            tls_server_name=self._access.server_name or dialled_name,
            ca_cert=self._access.ca,
            cert_key=self._access.key,
            cert_chain=self._access.cert,
        )
        # etcd3aio takes no channel options; without these a member back from a
        # restart waits out gRPC's reconnect backoff (up to two minutes) before
        # the registry uses it again. Pinned to etcd3aio 0.3, whose manager holds them.
        self._client._manager.grpc_options.extend(RECONNECT_OPTIONS)
        self._timeout = timeout_seconds
        self._endpoints = list(endpoints)
        self._addresses = addresses
        self._server_name = self._access.server_name or dialled_name
        self._prefix = prefix
        self._refresher: etcd3aio.auth.TokenRefresher | None = None

    async def connect(self) -> None:
        """Connect, authenticate and check that the cluster's prefix can be
        read and written: a wrong password or a role without the prefix
        fails here, at start, with a message saying which."""
        where = ",".join(self._endpoints)
        if self._resolve_error:
            raise Unavailable(f"etcd at {where}: {self._resolve_error}", Reason.METADATA_STORE_UNAVAILABLE)
        await self._client.connect()
        if self._access.user:
            assert self._client.auth is not None
            refresher = self._client.token_refresher(
                self._access.user, self._access.password, interval=self.TOKEN_REFRESH_SECONDS
            )
            try:
                self._refresher = await asyncio.wait_for(refresher.__aenter__(), self._timeout)
            except Exception as exc:
                if _is_credentials_error(exc):
                    raise ConfigError(
                        f"etcd at {where} refused user {self._access.user!r}: wrong user or password, or auth "
                        f"is not enabled there (QUIRE_ETCD_USER, QUIRE_ETCD_PASSWORD_FILE): {_details(exc)}"
                    ) from None
                await self._check_tls_settings()
                raise Unavailable(f"etcd at {where} is unreachable: {exc}", Reason.METADATA_STORE_UNAVAILABLE) from None
        probe = self._prefix + b".connect-check"
        try:
            await self._kv.get(self._prefix or b"\0", timeout=self._timeout)
            if self._prefix:
                await self._kv.put(probe, b"", timeout=self._timeout)
                await self._kv.delete(probe, timeout=self._timeout)
        except etcd3aio.errors.EtcdPermissionDeniedError:
            if not self._access.user:
                raise ConfigError(
                    f"etcd at {where} has authentication on and QUIRE_ETCD_USER is not set (etcd took the "
                    "client certificate's common name as the user, which may not use the cluster prefix "
                    f"{self._prefix.decode(errors='replace')!r}): set QUIRE_ETCD_USER and QUIRE_ETCD_PASSWORD_FILE"
                ) from None
            raise ConfigError(
                f"etcd user {self._access.user!r} may not read and write the cluster prefix "
                f"{self._prefix.decode(errors='replace')!r}: grant its role readwrite on that prefix "
                "(or check QUIRE_CLUSTER)"
            ) from None
        except Exception as exc:
            # An answer that means "your settings are wrong" ends the start; anything else is waited out.
            if _is_credentials_error(exc):
                raise ConfigError(
                    f"etcd at {where} refused the request as {self._access.user or 'an anonymous client'}: "
                    f"{_details(exc)}; set QUIRE_ETCD_USER and QUIRE_ETCD_PASSWORD_FILE to a user whose role "
                    f"may read and write {self._prefix.decode(errors='replace')!r}"
                ) from None
            await self._check_tls_settings()
            raise Unavailable(
                f"etcd at {where} is unreachable: {exc}",
                Reason.METADATA_STORE_UNAVAILABLE,
            ) from None

    async def _check_tls_settings(self) -> None:
        """After a failed connect: ConfigError if it failed because of the TLS settings."""
        if not self._addresses:
            return
        access = self._access
        await asyncio.to_thread(
            check_tls_settings, self._addresses[0], self._server_name, access.ca, access.cert, access.key
        )

    async def close(self) -> None:
        if self._refresher is not None:
            await self._refresher.__aexit__(None, None, None)
        await self._client.close()

    @property
    def _kv(self) -> etcd3aio.kv.KVService:
        assert self._client.kv is not None, "connect() first"
        return self._client.kv

    async def _guard(self, what: str, awaitable, key: bytes | None = None):  # type: ignore[no-untyped-def]
        """Await one etcd call: a span (naming the key, and the ledger's
        qualified name for a ledger key) and a latency sample around it, and
        etcd's failures turned into UNAVAILABLE."""
        started = time.perf_counter()
        outcome = "ok"
        try:
            with _tracer.start_as_current_span(f"etcd {what}") as span:
                if key is not None:
                    text = key.decode(errors="replace")
                    span.set_attribute("quire.etcd.key", text)
                    if "/ledgers/" in text:
                        span.set_attribute("quire.ledger", text.rsplit("/", 1)[-1])
                return await awaitable
        except etcd3aio.EtcdError as exc:
            outcome = "error"
            raise Unavailable(f"etcd {what} failed: {exc}", Reason.METADATA_STORE_UNAVAILABLE) from None
        except grpc.aio.AioRpcError as exc:
            outcome = "error"
            mapped = etcd_rpc_error(what, exc)
            if mapped is None:
                raise
            raise mapped from None
        except TimeoutError:
            outcome = "error"
            raise Unavailable(f"etcd {what} timed out", Reason.METADATA_STORE_UNAVAILABLE) from None
        finally:
            _etcd_latency.record(time.perf_counter() - started, {"operation": what, "outcome": outcome})

    async def get(self, key: bytes) -> KeyValue | None:
        response = await self._guard("get", self._kv.get(key, timeout=self._timeout), key)
        if not response.kvs:
            return None
        return _key_value(response.kvs[0])

    async def list_prefix(
        self, prefix: bytes, *, start_after: bytes | None = None, limit: int = 0
    ) -> tuple[list[KeyValue], int]:
        start = start_after + b"\x00" if start_after else prefix
        response = await self._guard(
            "list", self._kv.get(start, prefix_range_end(prefix), limit=limit, timeout=self._timeout)
        )
        items = [_key_value(kv) for kv in response.kvs]
        return items, response.header.revision

    async def list_keys(self, prefix: bytes, *, start_after: bytes | None = None, limit: int = 0) -> list[bytes]:
        """Keys under `prefix` after `start_after`, in order, without their values."""
        start = start_after + b"\x00" if start_after else prefix
        response = await self._guard(
            "list", self._kv.get(start, prefix_range_end(prefix), limit=limit, keys_only=True, timeout=self._timeout)
        )
        return [kv.key for kv in response.kvs]

    async def create(self, key: bytes, value: bytes, lease_id: int = 0) -> int | None:
        return await self.transact([key], {}, [Put(key, value, lease_id)])

    async def compare_and_swap(self, key: bytes, value: bytes, expected_version: int) -> int | None:
        return await self.transact([], {key: expected_version}, [Put(key, value)])

    async def delete(self, key: bytes, expected_version: int = 0) -> bool:
        """Delete the key (at `expected_version` if given); False when it is
        absent or at another version."""
        if not expected_version:
            current = await self.get(key)
            if current is None:
                return False
            expected_version = current.version
        return await self.transact([], {key: expected_version}, [Delete(key)]) is not None

    async def transact(
        self, absent: Sequence[bytes], versions: dict[bytes, int], ops: Sequence[Put | Delete]
    ) -> int | None:
        """Apply `ops` atomically if every key in `absent` is missing and every
        key in `versions` is at that version. Returns the new revision (the
        version of every key put), or None when a condition failed.

        Every write of the registry comes here, and this is where a lost answer
        is handled: an attempt that fails UNAVAILABLE or times out may have
        committed, so it is tried again within the etcd timeout (etcd3aio's
        own retries are off for it), and a compare that then fails is checked against the keys as
        they are now (read in the same transaction's failure branch): when
        they hold exactly what this write puts and lack what it deletes, the
        earlier attempt committed and the write succeeded."""
        compares = [Compare(result=Compare.EQUAL, target=Compare.CREATE, key=k, create_revision=0) for k in absent]
        compares += [
            Compare(result=Compare.EQUAL, target=Compare.MOD, key=k, mod_revision=v) for k, v in versions.items()
        ]
        requests: list[RequestOp] = []
        for op in ops:
            if isinstance(op, Put):
                requests.append(self._kv.txn_op_put(op.key, op.value, lease=op.lease_id))
            else:
                requests.append(self._kv.txn_op_delete(op.key))
        read_back = [self._kv.txn_op_get(op.key) for op in ops]
        first_key = next(iter([*absent, *versions, *(op.key for op in ops)]), None)
        answer_lost = False
        # The attempts share one deadline, as etcd3aio's did: a hung etcd costs the caller the
        # etcd timeout once, not once per attempt.
        deadline = time.monotonic() + self._timeout
        pauses = Backoff(
            first_seconds=0.05, longest_seconds=0.2, attempts=WRITE_ATTEMPTS - 1, within_seconds=self._timeout
        ).pauses()
        for _ in range(WRITE_ATTEMPTS):
            try:
                response = await self._transaction_attempt(compares, requests, read_back, deadline, first_key)
            except _LeaseGone:  # nothing written, and no attempt can bring the lease back
                raise Unavailable(
                    f"etcd transaction on {first_key!r} failed: the lease it puts keys on ran out before etcd "
                    "applied it; try again",
                    Reason.METADATA_STORE_UNAVAILABLE,
                ) from None
            except Unavailable:
                pause = next(pauses, None)
                if pause is None:
                    raise
                answer_lost = True
                await asyncio.sleep(pause)
                continue
            if response.succeeded:
                return int(response.header.revision)
            if not (answer_lost and self._recognise_own_commits):
                return None
            current = {
                op.key: (_key_value(result.response_range.kvs[0]) if result.response_range.kvs else None)
                for op, result in zip(ops, response.responses, strict=True)
            }
            if not committed_already(ops, current):
                return None
            log.info("etcd transaction on %r: an attempt whose answer was lost had committed", first_key)
            puts = [current[op.key] for op in ops if isinstance(op, Put) and not op.shared]
            return max(kv.version for kv in puts if kv is not None) if puts else int(response.header.revision)
        raise AssertionError("unreachable")

    async def _transaction_attempt(
        self,
        compares: list[Compare],
        requests: list[RequestOp],
        read_back: list[RequestOp],
        deadline: float,
        first_key: bytes | None,
    ) -> TxnResponse:
        """One attempt of `transact`: UNAVAILABLE as every etcd call out of reach, and _LeaseGone
        when it puts a key on a lease that ran out before etcd applied it (granted just before,
        and etcd slower than its TTL)."""
        try:
            return await self._guard(
                "transaction",
                self._kv.txn(compares, requests, read_back, timeout=deadline - time.monotonic(), max_attempts=1),
                first_key,
            )
        except grpc.aio.AioRpcError as exc:
            if _is_lease_gone(exc):
                raise _LeaseGone from None
            raise

    async def grant_lease(self, ttl_seconds: int) -> tuple[int, int]:
        assert self._client.lease is not None
        response = await self._guard("lease grant", self._client.lease.grant(ttl_seconds, timeout=self._timeout))
        return response.ID, response.TTL

    async def keep_alive(self, lease_id: int) -> int:
        """Refresh a lease once; returns its TTL, 0 if it has expired."""
        assert self._client.lease is not None
        stream = self._client.lease.keep_alive(lease_id)
        try:
            response = await self._guard("lease keep-alive", stream.read())
        finally:
            stream.cancel()
        return int(getattr(response, "TTL", 0) or 0)

    async def revoke_lease(self, lease_id: int) -> None:
        """Revoke a lease, and the keys on it with it. A lease that has already
        expired is fine; etcd out of reach raises Unavailable, as every call does."""
        assert self._client.lease is not None
        try:
            await self._guard("lease revoke", self._client.lease.revoke(lease_id, timeout=self._timeout))
        except grpc.aio.AioRpcError as exc:
            # A lease that already expired (a bookie cut off from the registry past its TTL):
            # nothing is left to revoke.
            if not _is_lease_gone(exc):
                raise
            log.info("lease %x had already expired", lease_id)

    async def watch_prefix(self, prefix: bytes, start_version: int) -> AsyncIterator[list[WatchEvent]]:
        """Batches of events under a prefix from `start_version` on, one batch
        per etcd revision group. Raises WatchCompacted when etcd no longer has
        that history (it cancels the watch and would otherwise fall silent)."""
        async for response in self._watch(prefix, start_version, progress_notify=False):
            if response.compact_revision > 0:
                raise WatchCompacted(response.compact_revision)
            if response.canceled:
                raise Unavailable(
                    f"etcd cancelled the watch: {response.cancel_reason or 'no reason given'}",
                    Reason.METADATA_STORE_UNAVAILABLE,
                )
            events = []
            for event in response.events:
                is_delete = event.type == 1  # mvccpb.Event.DELETE
                events.append(WatchEvent(event.kv.key, None if is_delete else event.kv.value, event.kv.mod_revision))
            if events:
                yield events

    async def watch_changes(self, prefix: bytes, start_revision: int) -> AsyncIterator[WatchBatch]:
        """Like watch_prefix, but every batch says up to which revision the
        watch has delivered, and etcd's progress notifications come through
        as empty batches (so an idle watcher still learns a recent revision).
        Raises WatchCompacted when etcd no longer has the history."""
        async for response in self._watch(prefix, start_revision, progress_notify=True):
            if response.compact_revision > 0:
                raise WatchCompacted(response.compact_revision)
            if response.canceled:
                raise Unavailable(
                    f"etcd cancelled the watch: {response.cancel_reason or 'no reason given'}",
                    Reason.METADATA_STORE_UNAVAILABLE,
                )
            if response.created:
                continue  # its header revision is etcd's, not how far the watch has caught up
            events = []
            for event in response.events:
                is_delete = event.type == 1  # mvccpb.Event.DELETE
                events.append(WatchEvent(event.kv.key, None if is_delete else event.kv.value, event.kv.mod_revision))
            if events:
                yield WatchBatch(max(event.version for event in events), events)
            elif response.header.revision > 0:
                yield WatchBatch(response.header.revision, [])  # progress: caught up, nothing changed

    async def _watch(
        self, prefix: bytes, start_revision: int, *, progress_notify: bool
    ) -> AsyncIterator[WatchResponse]:
        """etcd's watch stream over a prefix, opened again from the revision
        after the last one delivered when it fails transiently (etcd
        restarting). Not etcd3aio's watch(): its request stream never ends, and
        once the call has failed gRPC no longer cancels the task feeding it, so
        every etcd restart left that task pending for good ("Task was destroyed
        but it is pending", then "aclose(): asynchronous generator is already
        running" when it was collected). Here the request stream ends with the
        call, whichever way the call ends."""
        service = self._client.watch
        assert service is not None
        next_revision = start_revision
        pauses = WATCH_RETRY.pauses()
        while True:
            create = WatchCreateRequest(
                key=prefix, range_end=prefix_range_end(prefix), start_revision=next_revision,
                progress_notify=progress_notify,
            )  # fmt: skip
            call_over = asyncio.Event()
            call = service._stub.Watch(_watch_requests(create, call_over), metadata=service._metadata or None)
            try:
                async for response in call:
                    if response.events:
                        next_revision = response.events[-1].kv.mod_revision + 1
                    elif response.header.revision > 0 and (not response.created or next_revision == 0):
                        # Progress (delivered up to there), or a watch from "now" that started there.
                        next_revision = response.header.revision + 1
                    pauses = WATCH_RETRY.pauses()
                    yield response
                return
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                log.warning("etcd watch broke (%s); watching again from revision %d", exc.code().name, next_revision)
                await asyncio.sleep(next(pauses))
            finally:
                call_over.set()
                call.cancel()

    async def current_revision(self) -> int:
        """The store's revision now."""
        response = await self._guard(
            "revision", self._kv.get(self._prefix or b"\0", count_only=True, timeout=self._timeout)
        )
        return int(response.header.revision)

    async def history_kept(self, revision: int) -> bool:
        """Whether etcd still holds its history from `revision` on, so that a
        watch starting there misses nothing (False once compacted away, or
        for a revision it has not reached)."""
        try:
            await self._guard(
                "history check",
                self._kv.get(self._prefix or b"\0", revision=revision, count_only=True, timeout=self._timeout),
            )
        except grpc.aio.AioRpcError as exc:
            # OUT_OF_RANGE: "required revision has been compacted" or "is a future revision".
            if exc.code() == grpc.StatusCode.OUT_OF_RANGE:
                return False
            raise
        return True
