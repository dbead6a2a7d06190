"""The gateway's settings (QUIRE_GATEWAY_*, QUIRE_AUDITOR_*, where the
registry and placement are), declared once: read at start, rendered into
docs/configuration.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from quire_api.limits import MAX_ENTRY_PAYLOAD_BYTES
from quire_common.config import setting
from quire_common.settings import SECURITY, CommonEnv, registry_target_setting, resolver_enabled_setting

GATEWAY = "gateway"
SECTION = "Gateway"
AUDITOR = "Gateway: the auditor and the scrub"


@dataclass(frozen=True)
class AuditorEnv:
    interval_seconds: float = setting(
        "QUIRE_AUDITOR_INTERVAL_SECONDS",
        30.0,
        "how often the auditor looks for segments on lost bookies; `0` turns it off",
        services=GATEWAY,
        section=AUDITOR,
        unit="seconds",
        minimum=0,
    )
    lost_bookie_delay_seconds: float = setting(
        "QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS",
        60.0,
        "how long a referenced bookie must stay unregistered before its segments are re-replicated (longer "
        "than a rolling restart)",
        services=GATEWAY,
        section=AUDITOR,
        unit="seconds",
        minimum=0,
    )
    lease_seconds: int = setting(
        "QUIRE_AUDITOR_LEASE_SECONDS",
        10,
        "TTL (2 to 300) of the auditor role's lease: one gateway per cluster holds the role and acts; a standby "
        "takes over within this long after the holder dies (at once when it stops cleanly)",
        services=GATEWAY,
        section=AUDITOR,
        unit="seconds",
        minimum=2,
        maximum=300,
    )
    scrub_entries_per_second: float = setting(
        "QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND",
        2000.0,
        "the scrub's budget of replica copies checked per second (existence checks and sampled re-reads); `0` "
        "turns the scrub off",
        services=GATEWAY,
        section=AUDITOR,
        minimum=0,
    )
    scrub_bytes_per_second: float = setting(
        "QUIRE_AUDITOR_SCRUB_BYTES_PER_SECOND",
        8.0 * 1024 * 1024,
        "the scrub's budget of bytes re-read per second for its digest-checked sample",
        services=GATEWAY,
        section=AUDITOR,
        minimum=1024,
    )
    scrub_sample_entries: int = setting(
        "QUIRE_AUDITOR_SCRUB_SAMPLE_ENTRIES",
        16,
        "entries per ledger per pass re-read from every replica and digest-checked; the sample moves on each "
        "pass; `0`: existence checks only",
        services=GATEWAY,
        section=AUDITOR,
        minimum=0,
    )
    scrub_pass_interval_seconds: float = setting(
        "QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS",
        3600.0,
        "the period of a scrub pass, from the start of one to the start of the next: a pass spreads its checks "
        "over nine tenths of it (a thousand ledgers at a time), so every ledger is checked once per period at an "
        "even pace (a pass the budgets make longer runs back to back)",
        services=GATEWAY,
        section=AUDITOR,
        unit="seconds",
        minimum=1,
    )


@dataclass(frozen=True)
class CallLimitsEnv:
    """What one client call, caller and connection may hold (docs/security.md)."""

    request_idle_seconds: float = setting(
        "QUIRE_GATEWAY_REQUEST_IDLE_SECONDS",
        30.0,
        "how long a call may wait, after its headers, for its whole first request message (a unary call's only "
        "one); then it ends DEADLINE_EXCEEDED (reason `ERROR_REASON_INVALID_ARGUMENT`, not retryable: nothing "
        "was done). A slow link sending a large message needs it long enough. `0` waits for ever",
        services=GATEWAY,
        section=SECURITY,
        unit="seconds",
        minimum=0,
    )
    stream_idle_seconds: float = setting(
        "QUIRE_GATEWAY_STREAM_IDLE_SECONDS",
        0.0,
        "how long a client stream (AppendEntries, PutBlob) may wait for its next message after the first; then "
        "it ends DEADLINE_EXCEEDED as above. Off (`0`) by default: a writer session may legitimately pause "
        "between writes (keepalive still drops a vanished peer)",
        services=GATEWAY,
        section=SECURITY,
        unit="seconds",
        minimum=0,
    )
    max_calls_per_caller: int = setting(
        "QUIRE_GATEWAY_MAX_CALLS_PER_CALLER",
        1000,
        "calls one authenticated caller (a token's `sub`, or a certificate's common name) may have open at one "
        "gateway; more are refused at once with RESOURCE_EXHAUSTED (reason `ERROR_REASON_OVERLOADED`, "
        "retryable). Writes relayed by other gateways are not counted. `0`: no limit",
        services=GATEWAY,
        section=SECURITY,
        minimum=0,
    )
    max_streams_per_connection: int = setting(
        "QUIRE_GATEWAY_MAX_STREAMS_PER_CONNECTION",
        256,
        "HTTP/2 streams (calls) one client connection may have open at once (`grpc.max_concurrent_streams`); a "
        "client's further calls wait in its own library for a free stream. `0`: gRPC's default (no limit)",
        services=GATEWAY,
        section=SECURITY,
        minimum=0,
    )
    keepalive_seconds: float = setting(
        "QUIRE_GATEWAY_KEEPALIVE_SECONDS",
        60.0,
        "the gateway pings a client connection quiet for this long and closes it when no answer comes within "
        "20 s, so a vanished peer's calls end; `0` leaves gRPC's default (2 hours)",
        services=GATEWAY,
        section=SECURITY,
        unit="seconds",
        minimum=0,
    )
    max_connection_idle_seconds: float = setting(
        "QUIRE_GATEWAY_MAX_CONNECTION_IDLE_SECONDS",
        600.0,
        "a client connection with no call for this long is closed (GOAWAY; clients reconnect when they next "
        "call). `0`: never",
        services=GATEWAY,
        section=SECURITY,
        unit="seconds",
        minimum=0,
    )


@dataclass(frozen=True)
class GatewayEnv:
    address: str = setting(
        "QUIRE_GATEWAY_ADDRESS", "127.0.0.1:7000", "listen address", services=GATEWAY, section=SECTION
    )
    http_port: int = setting(
        "QUIRE_GATEWAY_HTTP_PORT",
        8000,
        "admin HTTP port (`/status`, `/metrics`); 0 turns it off",
        services=GATEWAY,
        section=SECTION,
        minimum=0,
        maximum=65535,
    )
    registry_target: str = registry_target_setting()
    placement_target: str = setting(
        "QUIRE_PLACEMENT_TARGET", "127.0.0.1:7002", "where placement is", services=GATEWAY, section=SECTION
    )
    resolver_enabled: bool = resolver_enabled_setting()
    name: str = setting(
        "QUIRE_GATEWAY_NAME",
        "",
        "who this gateway is: its session in the registry, the owner recorded in the ledgers it creates, and "
        "its name when it campaigns for the auditor role; unique per gateway process (1 to 253 printable "
        "characters): a restart under the same name takes any other session of it for dead, and two "
        "processes given one name recover each other's ledgers (fencing keeps them safe; logged as an error)",
        services=GATEWAY,
        section=SECTION,
        default_doc="`<hostname>:<port>`",
    )
    advertised_address: str = setting(
        "QUIRE_GATEWAY_ADVERTISED_ADDRESS",
        "",
        "`host:port` where other gateways reach this one to relay writes of the ledgers it owns; recorded in "
        "its session and in those ledgers' metadata",
        services=GATEWAY,
        section=SECTION,
        default_doc="`QUIRE_GATEWAY_ADDRESS` (with the host name for a wildcard host)",
    )
    peer_tls_name: str = setting(
        "QUIRE_GATEWAY_PEER_TLS_NAME",
        "",
        "the name checked against another gateway's certificate when relaying writes to it; set it to a name "
        "every gateway's certificate carries (on Kubernetes the gateway Service's name) when gateways "
        "advertise pod IPs",
        services=GATEWAY,
        section=SECTION,
        default_doc="— (the host of the owner's advertised address)",
    )
    session_seconds: int = setting(
        "QUIRE_GATEWAY_SESSION_SECONDS",
        10,
        "TTL of the gateway's session lease in the registry (2 to 300), renewed every third of it: after a "
        "gateway dies, writes of its ledgers fail UNAVAILABLE for at most about this long before the next one "
        "recovers and closes them",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=2,
        maximum=300,
    )
    max_inflight_bytes: int = setting(
        "QUIRE_GATEWAY_MAX_INFLIGHT_BYTES",
        64 * 1024 * 1024,
        "unacknowledged bytes per ledger before writers wait for room (back-pressure); each entry counts its "
        "packed size and 512 bytes for the bookkeeping it holds meanwhile",
        services=GATEWAY,
        section=SECTION,
        unit="bytes",
        minimum=1024 * 1024,
    )
    max_waiting_bytes: int = setting(
        "QUIRE_GATEWAY_MAX_WAITING_BYTES",
        0,
        "bytes of adds per ledger allowed to wait for room beyond `QUIRE_GATEWAY_MAX_INFLIGHT_BYTES`; an add "
        "that would wait past it is refused at once with RESOURCE_EXHAUSTED (reason `OVERLOADED`, retryable: "
        "its status carries a RetryInfo of 0.5 s), like BookKeeper's `ADD_ENTRY_REJECTED`. With 0 (no cap) "
        "writers wait as long as it takes",
        services=GATEWAY,
        section=SECTION,
        unit="bytes",
        minimum=0,
    )
    session_window_entries: int = setting(
        "QUIRE_GATEWAY_SESSION_WINDOW_ENTRIES",
        65_536,
        "entries an AppendEntries session takes and has not yet answered before it stops reading the client's "
        "messages until answers leave: a client that sends without reading its answers is held back by gRPC's "
        "flow control rather than growing the gateway's memory",
        services=GATEWAY,
        section=SECTION,
        unit="entries",
        minimum=1,
    )
    max_entry_bytes: int = setting(
        "QUIRE_GATEWAY_MAX_ENTRY_BYTES",
        MAX_ENTRY_PAYLOAD_BYTES,
        "largest entry payload an add takes (RESOURCE_EXHAUSTED, reason `ENTRY_TOO_LARGE`, above); at most the "
        "default (4 MiB - 64 KiB), so that a read reply holding the entry fits gRPC's default 4 MiB receive "
        "limit in every client, and a packed entry always fits a bookie's `QUIRE_BOOKIE_MAX_ENTRY_BYTES`",
        services=GATEWAY,
        section=SECTION,
        unit="bytes",
        minimum=1,
        maximum=MAX_ENTRY_PAYLOAD_BYTES,
    )
    bookie_retry_seconds: float = setting(
        "QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS",
        2.0,
        "how long an unreachable bookie is retried before it is replaced (ensemble change)",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    bookie_quarantine_seconds: float = setting(
        "QUIRE_GATEWAY_BOOKIE_QUARANTINE_SECONDS",
        300.0,
        "how long a bookie replaced after a failed write is avoided by this gateway's new ensembles and "
        "replacements while other bookies are left; it leaves at once when it registers again or stores "
        "entries again (`0`: no quarantine)",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    add_timeout_seconds: float = setting(
        "QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS",
        5.0,
        "deadline of one add to a bookie, from when it is sent on the bookie's `AddStream` (waiting behind "
        "earlier adds to a bookie that answers is back-pressure); past it the bookie counts as failed",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    delay_ensemble_change: bool = setting(
        "QUIRE_GATEWAY_DELAY_ENSEMBLE_CHANGE",
        False,
        "leave a failed bookie out instead of replacing it while every write set keeps Qa live members; the "
        "ledger is marked under-replicated and the auditor repairs it once closed (docs/decisions.md)",
        services=GATEWAY,
        section=SECTION,
    )
    explicit_lac_seconds: float = setting(
        "QUIRE_GATEWAY_EXPLICIT_LAC_SECONDS",
        0.1,
        "after this long without a new entry, the writing gateway writes a LAC no stored entry carries yet to "
        "the ensemble's bookies (explicit LAC), so readers and tails through other gateways see a burst's last "
        "entries; `0` never (they then wait for the next entry or the close)",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    recovery_timeout_seconds: float = setting(
        "QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS",
        30.0,
        "a recovery open (fence, read forward, re-add, close) fails UNAVAILABLE past this",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    recovery_bookie_timeout_seconds: float = setting(
        "QUIRE_GATEWAY_RECOVERY_BOOKIE_TIMEOUT_SECONDS",
        2.0,
        "deadline of each fence, LAC read, recovery read and recovery add to one bookie (a hung bookie costs "
        "at most this)",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    dependency_check_seconds: float = setting(
        "QUIRE_GATEWAY_DEPENDENCY_CHECK_SECONDS",
        1.0,
        "gRPC health check of the registry and placement this often (also its deadline); after two unanswered "
        "checks in a row (or a NOT_SERVING answer) creates fail UNAVAILABLE after one quick re-check (0.5 s at "
        "most) naming the dependency, and `/status` shows it under `dependencies`; 0 turns the checks off",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    metadata_cache_ledgers: int = setting(
        "QUIRE_GATEWAY_METADATA_CACHE_LEDGERS",
        10_000,
        "ledgers whose metadata the gateway keeps (least recently used out), kept current by the registry's "
        "`WatchLedgerMetadata`; reads, tails, blob reads and `GetLedgerMetadata` are answered from it "
        "(docs/architecture.md). `0` turns the cache and its watch off: every lookup asks the registry",
        services=GATEWAY,
        section=SECTION,
        minimum=0,
    )
    entry_cache_bytes: int = setting(
        "QUIRE_GATEWAY_ENTRY_CACHE_BYTES",
        64 * 1024 * 1024,
        "bytes of recently confirmed entries the gateway keeps (least recently used out): entries it wrote, "
        "once confirmed, and confirmed entries it read from bookies. Reads, tails and blob reads of them need "
        "no bookie; hits and misses are in `/metrics` and `/status` (docs/architecture.md). `0` turns it off",
        services=GATEWAY,
        section=SECTION,
        unit="bytes",
        minimum=0,
    )
    entry_cache_idle_seconds: float = setting(
        "QUIRE_GATEWAY_ENTRY_CACHE_IDLE_SECONDS",
        60.0,
        "an entry in the entry cache that nobody wrote or read for this long leaves it, and an idle gateway "
        "gives the memory back: the cache serves tails and read-after-write; readers further behind read "
        "from bookies. `0` keeps entries until newer ones need the room",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0,
    )
    speculative_read_seconds: float = setting(
        "QUIRE_GATEWAY_SPECULATIVE_READ_SECONDS",
        0.5,
        "a replica slower than this gets the same entries asked of the next replica too",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0.001,
    )
    owner_lac_timeout_seconds: float = setting(
        "QUIRE_GATEWAY_OWNER_LAC_TIMEOUT_SECONDS",
        2.0,
        "a confirmed read or a tail past what this gateway knows of an open ledger written by another gateway "
        "asks that owner for its LAC (read-your-writes); past this deadline the bookies' LAC stands and a read "
        "past it answers OUT_OF_RANGE",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=0.01,
    )
    blob_ledgers_per_scope: int = setting(
        "QUIRE_GATEWAY_BLOB_LEDGERS_PER_SCOPE",
        2,
        "open blob ledgers per scope (concurrent PutBlob calls per scope)",
        services=GATEWAY,
        section=SECTION,
        minimum=1,
    )
    blob_ledger_max_bytes: int = setting(
        "QUIRE_GATEWAY_BLOB_LEDGER_MAX_BYTES",
        1024**3,
        "a blob ledger is closed and replaced once it holds this many blob bytes",
        services=GATEWAY,
        section=SECTION,
        unit="bytes",
        minimum=1,
    )
    blob_ledger_max_age_seconds: float = setting(
        "QUIRE_GATEWAY_BLOB_LEDGER_MAX_AGE_SECONDS",
        3600.0,
        "… or once it is this old (idle ones are checked periodically)",
        services=GATEWAY,
        section=SECTION,
        unit="seconds",
        minimum=1,
    )
    tls_client_auth: str = setting(
        "QUIRE_GATEWAY_TLS_CLIENT_AUTH",
        "require",
        "`require`: clients present a certificate from the CA at the handshake (roles from a bearer token if "
        "one is sent, else from the certificate mapping); `none`: TLS without client certificates, bearer "
        "tokens only. Internal services always require one",
        services=GATEWAY,
        section=SECURITY,
        # grpc's Python API can require a client certificate or not ask for one; it
        # cannot ask for one and accept its absence.
        choices=("require", "none"),
    )
    fault_unsafe_no_repair_marks: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS",
        False,
        "fault injection (tests only): an ensemble change does not mark the entries confirmed without the "
        "replaced bookie (the positive control of ENS-10)",
        services=GATEWAY,
        section=SECTION,
    )
    fault_unsafe_skip_digest_check: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK",
        False,
        "fault injection (tests only): reads hand out payloads without checking digests (the corruption "
        "positive control)",
        services=GATEWAY,
        section=SECTION,
    )
    fault_unsafe_ignore_owner_session: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION",
        False,
        "fault injection (tests only): the gateway takes every recorded ledger owner for alive: writes are "
        "relayed to a dead owner and its ledgers are never recovered (GWY-2's control); logs a loud warning",
        services=GATEWAY,
        section=SECTION,
    )
    fault_wait_for_previous_session: bool = setting(
        "QUIRE_GATEWAY_FAULT_WAIT_FOR_PREVIOUS_SESSION",
        False,
        "fault injection (tests only): a gateway restarted under the same name takes its previous session "
        "for alive until that lease lapses, instead of ending it and recovering its ledgers at once, so "
        "their writes and the gateway's creates stall for up to QUIRE_GATEWAY_SESSION_SECONDS (GWY-4's "
        "and GWY-5's control)",
        services=GATEWAY,
        section=SECTION,
    )
    fault_unsafe_no_read_your_writes: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES",
        False,
        "fault injection (tests only): a confirmed read past what this gateway knows never asks the ledger's "
        "owner for its LAC, and relayed acknowledgements teach it nothing, so an entry acknowledged through "
        "another gateway may read OUT_OF_RANGE here (GWY-3's control); logs a loud warning",
        services=GATEWAY,
        section=SECTION,
    )
    fault_unsafe_auth_after_read: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ",
        False,
        "fault injection (tests only): authenticate unary calls after gRPC has read their whole message, and so "
        "take in what a refused caller sends (the positive control of the pre-read refusal); logs a loud "
        "warning",
        services=GATEWAY,
        section=SECURITY,
    )
    fault_unsafe_roles_by_common_name: bool = setting(
        "QUIRE_GATEWAY_FAULT_UNSAFE_ROLES_BY_COMMON_NAME",
        False,
        "fault injection (tests only): map a certificate to roles by its common name alone, whichever CA issued "
        "it and whatever service name it carries, and let QUIRE_AUTH_CLIENT_CERT_ROLES name service identities "
        "(the positive control of the client identity check); logs a loud warning",
        services=GATEWAY,
        section=SECURITY,
    )
    call_limits: CallLimitsEnv = dataclasses.field(default_factory=CallLimitsEnv)
    auditor: AuditorEnv = dataclasses.field(default_factory=AuditorEnv)
    common: CommonEnv = dataclasses.field(default_factory=CommonEnv)
