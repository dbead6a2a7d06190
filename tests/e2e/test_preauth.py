"""Callers refused before their bytes are taken, against a running TLS
cluster: an unauthenticated call is refused from its headers, before gRPC
reads its message; a call that sends only headers is ended by the gateway;
one caller cannot hold every call slot; bearer tokens beyond gRPC's default
header limit are refused as UNAUTHENTICATED, not RESOURCE_EXHAUSTED.

"gateway" has the protections on, with a short request idle timeout and a
small per-caller limit; "gateway-2" is the positive control: it reads the
request before authenticating (QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ)
and waits for ever for a request message (QUIRE_GATEWAY_REQUEST_IDLE_SECONDS=0).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from quire_api.rpc_status import call_status
from quire_client.cluster import LocalCluster, Ports, free_port
from quire_client.devcerts import CertBundle, write_dev_certs
from quire_proto.gateway.v1 import blob_pb2, ledger_pb2, ledger_pb2_grpc

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

IDLE_SECONDS = 2
CALLS_PER_CALLER = 50
ADD_ENTRY = "/quire.gateway.v1.LedgerService/AddEntry"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return write_dev_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, bundle: CertBundle) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("preauth-cluster"),
        Ports.free(),
        extra_env={"QUIRE_GATEWAY_PEER_TLS_NAME": "localhost"},
        gateway_env={
            "gateway": {
                "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS": str(IDLE_SECONDS),
                "QUIRE_GATEWAY_MAX_CALLS_PER_CALLER": str(CALLS_PER_CALLER),
                "QUIRE_GATEWAY_STREAM_IDLE_SECONDS": str(IDLE_SECONDS),
            },
            "gateway-2": {
                "QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ": "true",
                "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS": "0",
            },
        },
        tls=bundle,
        gateways=2,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def credentials(bundle: CertBundle, name: str) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        bundle.ca.read_bytes(), bundle.key(name).read_bytes(), bundle.cert(name).read_bytes()
    )


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM): what it took in at its worst."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def add_entry(channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        ADD_ENTRY,
        request_serializer=ledger_pb2.AddEntryRequest.SerializeToString,
        response_deserializer=ledger_pb2.AddEntryResponse.FromString,
    )


async def four_big_unauthenticated_adds(target: str, bundle: CertBundle) -> list[grpc.aio.AioRpcError]:
    """Four concurrent 32 MiB AddEntry calls with a forged token; their errors."""
    request = ledger_pb2.AddEntryRequest(payload=b"x" * (32 * MIB))
    async with grpc.aio.secure_channel(target, credentials(bundle, "client-admin")) as channel:
        call = add_entry(channel)

        async def one() -> grpc.aio.AioRpcError:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(request, metadata=(("authorization", "Bearer forged"),), timeout=120)
            return refused.value

        return list(await asyncio.gather(*(one() for _ in range(4))))


def test_unauthenticated_calls_are_refused_before_their_message_is_read(
    cluster: LocalCluster, bundle: CertBundle
) -> None:
    protected, control = cluster.gateway_targets
    growth = {}
    for name, target in (("gateway", protected), ("gateway-2", control)):
        pid = cluster.pid(name)
        assert pid is not None
        before = peak_rss_bytes(pid)
        errors = asyncio.run(four_big_unauthenticated_adds(target, bundle))
        growth[name] = peak_rss_bytes(pid) - before
        for error in errors:  # the same answer either way: only what it cost differs
            status = call_status(error)
            assert status.code == grpc.StatusCode.UNAUTHENTICATED, status
            assert status.reason == "ERROR_REASON_UNAUTHENTICATED"
            assert "bearer token invalid" in status.message
    # 128 MiB were sent at each: refused from the headers, little of it is taken in (what
    # HTTP/2 flow control lets in before the refusal: 10-27 MiB seen, under two messages)...
    assert growth["gateway"] < 48 * MIB, growth
    # ...while reading first (the positive control) takes in well over two of the messages.
    assert growth["gateway-2"] > 64 * MIB, growth


async def header_only_calls(target: str, channel_credentials: grpc.ChannelCredentials, count: int) -> list[object]:
    """`count` AddEntry calls that send their headers and never a message;
    how each ended (an AioRpcError, or TimeoutError if still open after 60 s)."""
    never = asyncio.Event()

    async def no_message() -> AsyncIterator[ledger_pb2.AddEntryRequest]:
        await never.wait()
        yield ledger_pb2.AddEntryRequest()

    async with grpc.aio.secure_channel(target, channel_credentials) as channel:
        # The wire does not tell a unary call from a stream of one: this sends AddEntry's headers alone.
        call = channel.stream_unary(
            ADD_ENTRY,
            request_serializer=ledger_pb2.AddEntryRequest.SerializeToString,
            response_deserializer=ledger_pb2.AddEntryResponse.FromString,
        )
        calls = [call(no_message()) for _ in range(count)]
        ended = await asyncio.gather(*(asyncio.wait_for(c, 60) for c in calls), return_exceptions=True)
        never.set()
        return list(ended)


def outcome(ended: object) -> object:
    return call_status(ended).code if isinstance(ended, grpc.aio.AioRpcError) else type(ended).__name__


def test_header_only_calls_are_ended_by_the_gateway(cluster: LocalCluster, bundle: CertBundle) -> None:
    protected = cluster.gateway_targets[0]
    # Unauthenticated (a service's certificate, which holds no roles at the gateway): refused from the headers.
    ended = asyncio.run(header_only_calls(protected, credentials(bundle, "gateway"), 200))
    assert Counter(map(outcome, ended)) == {grpc.StatusCode.UNAUTHENTICATED: 200}
    refused = call_status(ended[0])  # type: ignore[arg-type]
    assert refused.reason == "ERROR_REASON_CLIENT_IDENTITY_REQUIRED" and "service name" in refused.message

    # Authenticated: one caller's first CALLS_PER_CALLER are admitted and ended
    # after the idle timeout; the rest are refused at once (retryable).
    ended = asyncio.run(header_only_calls(protected, credentials(bundle, "client-writer"), 200))
    assert Counter(map(outcome, ended)) == {
        grpc.StatusCode.DEADLINE_EXCEEDED: CALLS_PER_CALLER,
        grpc.StatusCode.RESOURCE_EXHAUSTED: 200 - CALLS_PER_CALLER,
    }
    statuses = [call_status(e) for e in ended if isinstance(e, grpc.aio.AioRpcError)]
    idle = next(s for s in statuses if s.code == grpc.StatusCode.DEADLINE_EXCEEDED)
    assert "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS" in idle.message
    assert idle.reason == "ERROR_REASON_INVALID_ARGUMENT" and idle.retry_delay is None
    busy = next(s for s in statuses if s.code == grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "QUIRE_GATEWAY_MAX_CALLS_PER_CALLER" in busy.message
    assert busy.reason == "ERROR_REASON_OVERLOADED" and busy.retry_delay is not None

    # The slots are given back when the calls end: a real call goes through.
    with grpc.secure_channel(protected, credentials(bundle, "client-writer")) as channel:
        created = ledger_pb2_grpc.LedgerServiceStub(channel).CreateLedger(
            ledger_pb2.CreateLedgerRequest(scope_id=3), timeout=30
        )
        assert created.metadata.ledger_id.scope_id == 3


def test_streams_that_send_nothing_or_go_quiet_are_ended(cluster: LocalCluster, bundle: CertBundle) -> None:
    protected = cluster.gateway_targets[0]
    with grpc.secure_channel(protected, credentials(bundle, "client-writer")) as sync_channel:
        created = ledger_pb2_grpc.LedgerServiceStub(sync_channel).CreateLedger(
            ledger_pb2.CreateLedgerRequest(scope_id=3), timeout=30
        )
    ledger_id = created.metadata.ledger_id

    async def ended() -> dict[str, grpc.aio.AioRpcError]:
        never = asyncio.Event()

        async def silent(*first: object) -> AsyncIterator[object]:
            for message in first:
                yield message
            await never.wait()

        async with grpc.aio.secure_channel(protected, credentials(bundle, "client-writer")) as channel:
            append = channel.stream_stream(
                "/quire.gateway.v1.LedgerService/AppendEntries",
                request_serializer=ledger_pb2.AppendEntriesRequest.SerializeToString,
                response_deserializer=ledger_pb2.AppendEntriesResponse.FromString,
            )
            put = channel.stream_unary(
                "/quire.gateway.v1.BlobService/PutBlob",
                request_serializer=blob_pb2.PutBlobRequest.SerializeToString,
                response_deserializer=blob_pb2.PutBlobResponse.FromString,
            )
            first = ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id, payloads=[b"one"])

            async def session(call: grpc.aio.StreamStreamCall) -> tuple[int, grpc.aio.AioRpcError]:
                answers = 0
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    async for _ in call:
                        answers += 1
                return answers, refused.value

            async def blob() -> grpc.aio.AioRpcError:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await put(silent())
                return refused.value

            (silent_answers, silent_session), (quiet_answers, quiet_session), silent_blob = await asyncio.wait_for(
                asyncio.gather(session(append(silent())), session(append(silent(first))), blob()), 60
            )
            never.set()
            assert (silent_answers, quiet_answers) == (0, 1)  # the quiet session's entry was written and acknowledged
            return {"silent session": silent_session, "quiet session": quiet_session, "silent blob": silent_blob}

    for what, error in asyncio.run(ended()).items():
        status = call_status(error)
        assert status.code == grpc.StatusCode.DEADLINE_EXCEEDED, (what, status)
        setting = "STREAM_IDLE" if what == "quiet session" else "REQUEST_IDLE"
        assert f"QUIRE_GATEWAY_{setting}_SECONDS" in status.message, (what, status)


def test_without_the_idle_timeout_header_only_calls_stay_open(cluster: LocalCluster, bundle: CertBundle) -> None:
    control = cluster.gateway_targets[1]

    async def still_open_after_the_protected_timeout() -> list[bool]:
        never = asyncio.Event()

        async def no_message() -> AsyncIterator[ledger_pb2.AddEntryRequest]:
            await never.wait()
            yield ledger_pb2.AddEntryRequest()

        async with grpc.aio.secure_channel(control, credentials(bundle, "client-writer")) as channel:
            call = channel.stream_unary(
                ADD_ENTRY,
                request_serializer=ledger_pb2.AddEntryRequest.SerializeToString,
                response_deserializer=ledger_pb2.AddEntryResponse.FromString,
            )
            calls = [call(no_message()) for _ in range(20)]
            await asyncio.sleep(IDLE_SECONDS * 5)  # well past what the protected gateway allows
            open_calls = [not c.done() for c in calls]
            for c in calls:
                c.cancel()
            return open_calls

    assert all(asyncio.run(still_open_after_the_protected_timeout()))


@pytest.mark.parametrize(
    ("token_bytes", "code"),
    [
        (12 * 1024, grpc.StatusCode.UNAUTHENTICATED),  # above the 8 KiB a token may have
        (20 * 1024, grpc.StatusCode.UNAUTHENTICATED),  # above gRPC's default 16 KiB header limit
        (80 * 1024, grpc.StatusCode.RESOURCE_EXHAUSTED),  # above the gateway's 64 KiB header limit: gRPC's refusal
    ],
)
def test_oversized_tokens_get_the_documented_code(
    cluster: LocalCluster, bundle: CertBundle, token_bytes: int, code: grpc.StatusCode
) -> None:
    async def list_with_token() -> grpc.aio.AioRpcError:
        async with grpc.aio.secure_channel(cluster.gateway_target, credentials(bundle, "client-admin")) as channel:
            call = channel.unary_unary(
                "/quire.gateway.v1.LedgerService/ListLedgers",
                request_serializer=ledger_pb2.ListLedgersRequest.SerializeToString,
                response_deserializer=ledger_pb2.ListLedgersResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(
                    ledger_pb2.ListLedgersRequest(),
                    metadata=(("authorization", "Bearer " + "a" * token_bytes),),
                    timeout=30,
                )
            return refused.value

    status = call_status(asyncio.run(list_with_token()))
    assert status.code == code, status
    if code == grpc.StatusCode.UNAUTHENTICATED:
        assert status.reason == "ERROR_REASON_UNAUTHENTICATED"
        assert status.message == "bearer token too long"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("QUIRE_GATEWAY_REQUEST_IDLE_SECONDS", "soon"),
        ("QUIRE_GATEWAY_STREAM_IDLE_SECONDS", "-1"),
        ("QUIRE_GATEWAY_MAX_CALLS_PER_CALLER", "-3"),
        ("QUIRE_GATEWAY_MAX_STREAMS_PER_CONNECTION", "many"),
        ("QUIRE_GATEWAY_KEEPALIVE_SECONDS", "-5"),
        ("QUIRE_GATEWAY_MAX_CONNECTION_IDLE_SECONDS", "x"),
        ("QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ", "maybe"),
    ],
)
def test_a_bad_bound_stops_the_gateway_naming_it(cluster: LocalCluster, setting: str, value: str) -> None:
    env = dict(cluster.processes["gateway"].env)
    env.update(
        {
            "QUIRE_GATEWAY_ADDRESS": f"127.0.0.1:{free_port()}",
            "QUIRE_GATEWAY_HTTP_PORT": str(free_port()),
            setting: value,
        }
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "quire_gateway"], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:  # subprocess.run kills it
        pytest.fail(f"the gateway started with {setting}={value!r}")
    assert done.returncode == 2, done.stderr
    assert setting in done.stderr
    assert "Traceback" not in done.stderr
