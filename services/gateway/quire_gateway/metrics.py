"""The gateway's metrics (docs/telemetry.md lists them), in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Observation

from quire_common.telemetry import duration_histogram, meter

_meter = meter("quire.gateway")

add_latency = duration_histogram(_meter, "quire.gateway.add.duration", "From an entry's arrival to its acknowledgement")
read_latency = duration_histogram(_meter, "quire.gateway.read.duration", "One chunk of a read, across its replicas")
ensemble_changes = _meter.create_counter(
    "quire.gateway.ensemble_changes", unit="{change}", description="Bookies replaced in a ledger's ensemble"
)
delayed_ensemble_changes = _meter.create_counter(
    "quire.gateway.delayed_ensemble_changes",
    unit="{bookie}",
    description="Failed bookies left out of a ledger's writes without an ensemble change",
)
repair_flags = _meter.create_counter(
    "quire.gateway.repair_flags",
    unit="{bookie}",
    description="Replicas marked in a ledger's metadata for repair after a read found their copy damaged",
)
recovery_runs = _meter.create_counter(
    "quire.gateway.recoveries", unit="{recovery}", description="Recovery opens, by outcome"
)
digest_mismatches = _meter.create_counter(
    "quire.gateway.digest_mismatches", unit="{entry}", description="Replica copies whose digest did not check"
)


class EntryCounts:
    """Counts the write path bumps per entry: a Python int costs it nothing where an
    OpenTelemetry record would cost microseconds; exported when metrics are read."""

    __slots__ = ("acknowledged",)

    def __init__(self) -> None:
        self.acknowledged = 0  # entries this gateway's writers saw reach their ack quorum


entry_counts = EntryCounts()


class AddLatencies:
    """Add latency, sampled per batch rather than per entry (a record costs
    microseconds; the write path is CPU-bound): writers note the latency of
    each run of entries they acknowledge, a comparison, and each answer
    message from a bookie then records the longest noted since the last
    one as a single sample of `add_latency`."""

    __slots__ = ("longest",)

    def __init__(self) -> None:
        self.longest = 0.0

    def note(self, seconds: float) -> None:
        if seconds > self.longest:
            self.longest = seconds

    def record(self) -> None:
        if self.longest:
            add_latency.record(self.longest)
            self.longest = 0.0


add_latencies = AddLatencies()
acknowledged_entries = _meter.create_observable_counter(
    "quire.gateway.entries.acknowledged",
    callbacks=[lambda _: [Observation(entry_counts.acknowledged)]],
    unit="{entry}",
    description="Entries confirmed to writers through this gateway (each entry once, whatever its copies)",
)

# Set by the entry point to the caches' counters: the ledger metadata cache
# (metadata_cache.py, LedgerMetadataCache.stats) and the entry cache
# (entry_cache.py, EntryCache.status).
metadata_cache_stats: Callable[[], dict[str, int]] | None = None
entry_cache_stats: Callable[[], dict[str, int]] | None = None


def _observe(source: str, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A callback reporting counter `name` of the stats function in global `source`, once set."""

    def observe(_: CallbackOptions) -> Iterable[Observation]:
        stats = globals()[source]
        if stats is not None:
            yield Observation(stats()[name])

    return observe


def _observe_metadata_cache(name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    return _observe("metadata_cache_stats", name)


def _observe_entry_cache(name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    return _observe("entry_cache_stats", name)


metadata_cache_hits = _meter.create_observable_counter(
    "quire.gateway.metadata_cache.hits",
    callbacks=[_observe_metadata_cache("hits")],
    unit="{lookup}",
    description="Ledger metadata lookups answered from the gateway's cache",
)
metadata_cache_misses = _meter.create_observable_counter(
    "quire.gateway.metadata_cache.misses",
    callbacks=[_observe_metadata_cache("misses")],
    unit="{lookup}",
    description="Ledger metadata lookups that went to the registry (not cached, or not trusted)",
)
metadata_cache_ledgers = _meter.create_observable_gauge(
    "quire.gateway.metadata_cache.ledgers",
    callbacks=[_observe_metadata_cache("ledgers")],
    unit="{ledger}",
    description="Ledgers whose metadata the gateway's cache holds",
)
metadata_watch_connected = _meter.create_observable_gauge(
    "quire.gateway.metadata_cache.watch_connected",
    callbacks=[_observe_metadata_cache("watch_connected")],
    unit="1",
    description="1 while the registry's ledger metadata watch is connected, else 0",
)
metadata_watch_resets = _meter.create_observable_counter(
    "quire.gateway.metadata_cache.watch_resets",
    callbacks=[_observe_metadata_cache("watch_resets")],
    unit="{reset}",
    description="Ledger metadata watch resets (history compacted): open ledgers' entries dropped",
)


entry_cache_hits = _meter.create_observable_counter(
    "quire.gateway.entry_cache.hits",
    callbacks=[_observe_entry_cache("hits")],
    unit="{entry}",
    description="Entries a read or tail got from the gateway's entry cache",
)
entry_cache_misses = _meter.create_observable_counter(
    "quire.gateway.entry_cache.misses",
    callbacks=[_observe_entry_cache("misses")],
    unit="{entry}",
    description="Entries a read or tail looked for in the entry cache and read from bookies",
)
entry_cache_bytes = _meter.create_observable_gauge(
    "quire.gateway.entry_cache.size",
    callbacks=[_observe_entry_cache("size_bytes")],
    unit="By",
    description="Bytes the gateway's entry cache holds (payloads and per-entry overhead)",
)
entry_cache_evictions = _meter.create_observable_counter(
    "quire.gateway.entry_cache.evictions",
    callbacks=[_observe_entry_cache("evictions")],
    unit="{entry}",
    description="Entries dropped from the entry cache to stay within QUIRE_GATEWAY_ENTRY_CACHE_BYTES",
)
entry_cache_expired = _meter.create_observable_counter(
    "quire.gateway.entry_cache.expired",
    callbacks=[_observe_entry_cache("expired")],
    unit="{entry}",
    description="Entries dropped from the entry cache after QUIRE_GATEWAY_ENTRY_CACHE_IDLE_SECONDS unused",
)


# Set by the entry point to the open streaming calls by method (servicer.py, ActiveStreams.snapshot).
active_stream_counts: Callable[[], dict[str, int]] | None = None


def _observe_active_streams(_: CallbackOptions) -> Iterable[Observation]:
    counts = active_stream_counts() if active_stream_counts is not None else {}
    for method, count in counts.items():
        yield Observation(count, {"method": method})


active_streams = _meter.create_observable_gauge(
    "quire.gateway.active_streams",
    callbacks=[_observe_active_streams],
    unit="{stream}",
    description="Streaming calls open now, by method",
)


# Set by the entry point to the auditor's figures (auditor.py, AuditState.figures
# plus "active"): counted by whichever gateway holds the auditor role.
auditor_figures: Callable[[], dict[str, float]] | None = None


def _observe_auditor(name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    return _observe("auditor_figures", name)


def _observe_cluster(names: dict[str, dict[str, str]]) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A callback reporting auditor figures (name -> attributes) only from the
    gateway holding the auditor role, once it has audited: a cluster-level
    figure comes from one process, so sum() over gateways does not multiply it."""

    def observe(_: CallbackOptions) -> Iterable[Observation]:
        figures = auditor_figures() if auditor_figures is not None else {}
        if figures.get("active"):
            for name, attributes in names.items():
                if name in figures:
                    yield Observation(figures[name], attributes)

    return observe


auditor_active = _meter.create_observable_gauge(
    "quire.gateway.auditor.active",
    callbacks=[_observe_auditor("active")],
    unit="1",
    description="1 while this gateway holds the auditor role (one per cluster), else 0",
)
scrub_entries_checked = _meter.create_observable_counter(
    "quire.gateway.scrub.entries_checked",
    callbacks=[_observe_auditor("scrub_entries_checked")],
    unit="{copy}",
    description="Replica copies the scrub asked a bookie about (present or missing)",
)
scrub_entries_sampled = _meter.create_observable_counter(
    "quire.gateway.scrub.entries_sampled",
    callbacks=[_observe_auditor("scrub_entries_sampled")],
    unit="{copy}",
    description="Replica copies the scrub read back and digest-checked",
)
scrub_missing = _meter.create_observable_counter(
    "quire.gateway.scrub.missing",
    callbacks=[_observe_auditor("scrub_missing")],
    unit="{copy}",
    description="Copies a bookie should hold and does not, found by the scrub",
)
scrub_damaged = _meter.create_observable_counter(
    "quire.gateway.scrub.damaged",
    callbacks=[_observe_auditor("scrub_damaged")],
    unit="{copy}",
    description="Copies the scrub found unreadable or with a digest that does not check",
)
repaired_entries = _meter.create_observable_counter(
    "quire.gateway.auditor.repaired_entries",
    callbacks=[_observe_auditor("repaired_entries")],
    unit="{copy}",
    description="Marked copies (missing or damaged) the auditor copied back from a good replica",
)
scrub_lag = _meter.create_observable_gauge(
    "quire.gateway.scrub.lag",
    callbacks=[_observe_auditor("scrub_lag_seconds")],
    unit="s",
    description="Age of the oldest scrub check: since the last completed pass began",
)

under_replicated_segments = _meter.create_observable_gauge(
    "quire.gateway.under_replicated_segments",
    callbacks=[_observe_cluster({"under_replicated_segments": {}})],
    unit="{segment}",
    description="Ledger segments with a replica on a missing bookie or marked for repair (auditor, last round)",
)
cluster_bookies = _meter.create_observable_gauge(
    "quire.cluster.bookies",
    callbacks=[
        _observe_cluster(
            {
                "bookies_writable": {"state": "writable"},
                "bookies_read_only": {"state": "read_only"},
                "bookies_missing": {"state": "missing"},
            }
        )
    ],
    unit="{bookie}",
    description="Bookies registered writable or read-only, and missing (named by a ledger, not registered)",
)
cluster_largest_ensemble = _meter.create_observable_gauge(
    "quire.cluster.largest_ensemble",
    callbacks=[_observe_cluster({"largest_ensemble": {}})],
    unit="{bookie}",
    description="The largest ensemble of any ledger: the writable bookies an ensemble change may need (auditor)",
)
cluster_ledgers = _meter.create_observable_gauge(
    "quire.cluster.ledgers",
    callbacks=[_observe_cluster({f"ledgers_{state}": {"state": state} for state in ("open", "in_recovery", "closed")})],
    unit="{ledger}",
    description="Ledgers by state (auditor, last round)",
)
cluster_under_replicated_ledgers = _meter.create_observable_gauge(
    "quire.cluster.under_replicated.ledgers",
    callbacks=[_observe_cluster({"under_replicated_ledgers": {}})],
    unit="{ledger}",
    description="Ledgers with a replica on a missing bookie or marked for repair (auditor, last round)",
)
cluster_under_replicated_entries = _meter.create_observable_gauge(
    "quire.cluster.under_replicated.entries",
    callbacks=[_observe_cluster({"under_replicated_entries": {}})],
    unit="{entry}",
    description="Entry copies on a missing bookie or marked for repair, of known extent (auditor, last round)",
)
