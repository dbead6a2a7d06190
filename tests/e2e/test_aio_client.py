"""The asyncio client (quire_client.aio) against three gateway processes
behind HAProxy (round robin, as a Kubernetes Service puts them): an
application's whole round through the balancer (a write session that resumes
across a SIGKILL of the gateway its connection landed on, a tail, a
read-back, a blob) with nothing lost or written twice; typed results and
errors; per-call timeouts and cancellation."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import pytest

from quire_api.ids import LedgerId
from quire_client.aio import AsyncQuireClient
from quire_client.cluster import LocalCluster
from quire_client.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    NotFoundError,
    OutOfRangeError,
)
from quire_client.results import AppendAck, Entry, LedgerMetadata, LedgerState
from tests.e2e.conftest import HAPROXY_INSTALLED, NO_HAPROXY, running_cluster

ENTRIES = 1500
KILL_AT = 300  # where the burst the SIGKILL lands in starts
BURST = 600

needs_haproxy = pytest.mark.skipif(not HAPROXY_INSTALLED, reason=NO_HAPROXY)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three gateways, behind HAProxy when it is installed (the tests that
    address gateways directly run either way)."""
    with running_cluster(
        tmp_path_factory.mktemp("aio"), gateways=3, balancer=HAPROXY_INSTALLED, QUIRE_GATEWAY_SESSION_SECONDS="3"
    ) as local:
        yield local


@pytest.fixture(autouse=True)
def every_gateway_running(cluster: LocalCluster) -> Iterator[None]:
    """Tests kill or pause gateways; the next one starts with all three running."""
    yield
    restart_the_dead(cluster)


def restart_the_dead(cluster: LocalCluster) -> None:
    for name in cluster.gateway_names:
        if cluster.pid(name) is None:
            cluster.start_process(name, timeout=120)


def client_at(cluster: LocalCluster, first: int, **options: object) -> AsyncQuireClient:
    """A client on gateway `first` that knows the others (in order after it)."""
    targets = cluster.gateway_targets
    ordered = targets[first:] + targets[:first]
    return AsyncQuireClient(ordered[0], gateways=ordered[1:], **options)  # type: ignore[arg-type]


async def balanced_client(cluster: LocalCluster, **options: object) -> tuple[AsyncQuireClient, str]:
    """A client that knows only the balancer's address, and the gateway its
    connection landed on, which the owner of a ledger it creates names. (Its
    later calls go over that connection until it breaks. Clients in one
    process may share a connection to the balancer, so HAProxy's connection
    counts cannot tell.)"""
    client = AsyncQuireClient(cluster.gateway_target, **options)  # type: ignore[arg-type]
    probe = await client.create_ledger()
    await client.delete_ledger(probe.ledger_id)
    assert probe.owner is not None
    return client, cluster.gateway_names[cluster.gateway_targets.index(probe.owner.address)]


def payloads() -> list[bytes]:
    return [b"p%06d-" % i + b"x" * 1017 for i in range(ENTRIES)]


async def paced(items: list[bytes], burst_sent: asyncio.Event) -> AsyncIterator[bytes]:
    """The stream lasts seconds, with a burst at KILL_AT sent as fast as the
    session takes it; `burst_sent` is set in its middle, so a kill then finds
    entries in flight (some stored, not yet acknowledged)."""
    for index, item in enumerate(items):
        if not KILL_AT <= index < KILL_AT + BURST:
            await asyncio.sleep(0.002)
        if index == KILL_AT + BURST // 2:
            burst_sent.set()
        yield item


async def write_through_a_gateway_that_is_killed(
    cluster: LocalCluster, writer: AsyncQuireClient, ledger: LedgerId, victim: str
) -> list[AppendAck]:
    """Append every payload with `writer` and SIGKILL gateway `victim` (the
    one its writes go through) in the middle of the burst."""
    burst_sent = asyncio.Event()
    acks: list[AppendAck] = []

    async def append() -> None:
        async for ack in writer.append(ledger, paced(payloads(), burst_sent), batch_size=20):
            acks.append(ack)

    appending = asyncio.create_task(append())
    burst_or_end = asyncio.create_task(burst_sent.wait())
    await asyncio.wait([appending, burst_or_end], timeout=120, return_when=asyncio.FIRST_COMPLETED)
    assert burst_sent.is_set(), f"the burst was not sent ({len(acks)} acknowledgements)"
    cluster.kill(victim)
    await asyncio.wait_for(appending, timeout=300)
    return acks


async def ledger_owned_elsewhere(cluster: LocalCluster, landed: str) -> LedgerId:
    """A ledger created (and so written) by a gateway other than `landed`:
    what another process of the application, whose connection to the
    balancer landed elsewhere, would have made. The writer's gateway then
    relays to the owner, and killing it loses the session, not the ledger.
    (Clients in one process share their connection to the balancer, so the
    owner is addressed directly.)"""
    owner = next(i for i, name in enumerate(cluster.gateway_names) if name != landed)
    async with client_at(cluster, owner) as creator:
        created = await creator.create_ledger(custom_metadata={"app": "aio"})
    assert isinstance(created, LedgerMetadata) and isinstance(created.ledger_id, LedgerId)
    assert created.state is LedgerState.OPEN and created.custom_metadata == {"app": "aio"}
    return created.ledger_id


@needs_haproxy
async def test_an_asyncio_application_behind_a_balancer_survives_a_sigkill_of_its_gateway(
    cluster: LocalCluster,
) -> None:
    writer, landed = await balanced_client(cluster)
    async with writer, AsyncQuireClient(cluster.gateway_target) as tailer:
        ledger = await ledger_owned_elsewhere(cluster, landed)
        tailed: list[Entry] = []

        async def tail() -> None:
            async for entry in tailer.tail(ledger):
                tailed.append(entry)

        tailing = asyncio.create_task(tail())
        acks = await write_through_a_gateway_that_is_killed(cluster, writer, ledger, landed)

        # The session broke with its gateway and went on through the balancer, to another.
        assert cluster.pid(landed) is None and writer.resumed_writes >= 1
        # The acknowledgements cover every entry once, in order, from 0.
        assert [a.first_entry_id for a in acks] == [0] + [a.last_entry_id + 1 for a in acks[:-1]]
        assert acks[-1].last_entry_id == ENTRIES - 1

        closed = await writer.close_ledger(ledger)
        assert closed.state is LedgerState.CLOSED and closed.last_entry_id == ENTRIES - 1
        await asyncio.wait_for(tailing, timeout=120)  # a tail ends at the closed ledger's last entry

        stored = [entry.payload async for entry in writer.read(ledger)]
        counts = Counter(stored)
        assert [p for p in payloads() if counts[p] == 0] == []  # nothing lost
        assert {p: n for p, n in counts.items() if n > 1} == {}  # nothing written twice
        assert stored == payloads()
        assert [e.payload for e in tailed] == payloads()
        assert [e.entry_id for e in tailed] == list(range(ENTRIES))

        blob = bytes(range(256)) * 4096 * 3  # 3 MiB, sent in parts
        blob_id = await writer.put_blob(blob, part_bytes=1024 * 1024)
        assert await tailer.get_blob(blob_id) == blob
        for index, name in enumerate(cluster.gateway_names):
            if name != landed:
                async with client_at(cluster, index) as reader:
                    assert await reader.get_blob(blob_id) == blob


@needs_haproxy
async def test_control_resuming_without_the_condition_writes_twice(cluster: LocalCluster) -> None:
    """Positive control for the test above: the same kill, with the client
    resending unacknowledged entries without expected_entry_id; entries that
    had landed are written again, and the read-back sees them."""
    # A kill can land between two messages, with nothing stored and unacknowledged (likelier on a
    # busy machine): the scenario is run up to three times, and one run must show duplicates.
    for _ in range(3):
        restart_the_dead(cluster)
        writer, landed = await balanced_client(cluster, conditional_resume=False)
        async with writer:
            ledger = await ledger_owned_elsewhere(cluster, landed)
            await write_through_a_gateway_that_is_killed(cluster, writer, ledger, landed)
            assert writer.resumed_writes >= 1
            await writer.close_ledger(ledger)
            stored = [entry.payload async for entry in writer.read(ledger)]
        if sum(n - 1 for n in Counter(stored).values() if n > 1):
            return
    raise AssertionError("resending without the condition must write some entries twice (three kills, none did)")


async def test_typed_results_and_errors(cluster: LocalCluster) -> None:
    async with client_at(cluster, 0) as quire:
        ledger = (await quire.create_ledger(ensemble_size=3, write_quorum_size=3, ack_quorum_size=2)).ledger_id
        assert await quire.append_all(ledger, [b"a", b"b"]) == 1
        assert await quire.add_entry(ledger, b"c", expected_entry_id=2) == 2
        with pytest.raises(FailedPreconditionError) as refused:
            await quire.add_entry(ledger, b"d", expected_entry_id=7)
        assert refused.value.reason == "ERROR_REASON_UNEXPECTED_ENTRY_ID"
        assert refused.value.details["next_entry_id"] == "3"
        assert await quire.next_entry_id(ledger) == 3

        opened = await quire.open_ledger(ledger)
        assert opened.metadata.ledger_id == ledger and opened.last_add_confirmed == 2
        assert opened.metadata.write_quorum_size == 3 and len(opened.metadata.ensembles[0].bookie_ids) == 3
        assert await quire.read_entry(ledger, 1) == Entry(1, b"b", 2)
        with pytest.raises(OutOfRangeError):
            await quire.read_entry(ledger, 3)
        assert [item async for item in quire.read_entries_by_id(ledger, [2, 0])] == [
            Entry(2, b"c", 3),
            Entry(0, b"a", 1),
        ]

        metadata, version = await quire.ledger_metadata(ledger)
        assert metadata.ledger_id == ledger and version > 0
        assert ledger in [m.ledger_id async for m in quire.list_ledgers(scope_id=ledger.scope_id)]

        async with quire.writer(ledger, batch_size=2) as writer:
            for payload in (b"d", b"e", b"f"):
                await writer.append(payload)
            assert await writer.flush(timeout=60) == 5

        await quire.close_ledger(ledger)
        assert [e.payload async for e in quire.read(ledger, first=3)] == [b"d", b"e", b"f"]
        await quire.delete_ledger(ledger)
        with pytest.raises(NotFoundError):
            await quire.open_ledger(ledger)


async def test_a_call_ends_at_its_timeout_and_a_cancelled_tail_stops(cluster: LocalCluster) -> None:
    async with client_at(cluster, 0) as quire:
        ledger = (await quire.create_ledger()).ledger_id
        await quire.add_entry(ledger, b"only")

        # A tail of an open ledger with nothing more to come ends at its timeout.
        seen: list[Entry] = []
        with pytest.raises(DeadlineExceededError):
            async for entry in quire.tail(ledger, timeout=2):
                seen.append(entry)
        assert [e.payload for e in seen] == [b"only"]

        # A unary call to a gateway that does not answer (paused) ends at its own timeout.
        cluster.pause(cluster.gateway_names[0])
        try:
            with pytest.raises(DeadlineExceededError):
                await quire.last_add_confirmed(ledger, timeout=1)
        finally:
            cluster.resume(cluster.gateway_names[0])

        # Cancelling the task of a tail ends it; the client goes on working.
        first_seen = asyncio.Event()

        async def tail() -> None:
            async for _ in quire.tail(ledger):
                first_seen.set()

        tailing = asyncio.create_task(tail())
        await asyncio.wait_for(first_seen.wait(), timeout=60)
        tailing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tailing
        assert await quire.add_entry(ledger, b"after", timeout=30) == 1
