"""The gateway's configuration: its settings (quire_gateway.settings) checked
and turned into what the gateway's code takes."""

from __future__ import annotations

import socket

from quire_common.call_limits import ConnectionLimits, RequestIdle
from quire_common.config import ConfigError
from quire_gateway.autorecovery.auditor import AuditorSettings
from quire_gateway.autorecovery.scrub import ScrubSettings
from quire_gateway.blobs import BlobSettings
from quire_gateway.read.replicas import ReadSettings
from quire_gateway.recovery import RecoverySettings
from quire_gateway.settings import AuditorEnv, CallLimitsEnv, GatewayEnv
from quire_gateway.write.handle import WriteSettings


def advertised_address(listen: str, configured: str) -> str:
    """Where other gateways reach this one (QUIRE_GATEWAY_ADVERTISED_ADDRESS):
    by default the listen address, with this host's name for a wildcard host."""
    host, _, port = listen.rpartition(":")
    default = listen if host not in ("", "0.0.0.0", "[::]", "::") else f"{socket.gethostname()}:{port}"
    value = configured or default
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"QUIRE_GATEWAY_ADVERTISED_ADDRESS={value!r} is not host:port")
    return value


def request_idle(env: CallLimitsEnv) -> RequestIdle:
    return RequestIdle(first_message_seconds=env.request_idle_seconds, between_messages_seconds=env.stream_idle_seconds)


def connection_limits(env: CallLimitsEnv) -> ConnectionLimits:
    return ConnectionLimits(
        max_streams_per_connection=env.max_streams_per_connection,
        keepalive_seconds=env.keepalive_seconds,
        max_connection_idle_seconds=env.max_connection_idle_seconds,
    )


def write_settings(env: GatewayEnv) -> WriteSettings:
    return WriteSettings(
        max_inflight_bytes=env.max_inflight_bytes,
        max_waiting_bytes=env.max_waiting_bytes,
        session_window_entries=env.session_window_entries,
        bookie_retry_seconds=env.bookie_retry_seconds,
        add_timeout_seconds=env.add_timeout_seconds,
        delay_ensemble_change=env.delay_ensemble_change,
        bookie_quarantine_seconds=env.bookie_quarantine_seconds,
        max_entry_bytes=env.max_entry_bytes,
        mark_replaced_copies=not env.fault_unsafe_no_repair_marks,
        explicit_lac_seconds=env.explicit_lac_seconds,
    )


def recovery_settings(env: GatewayEnv) -> RecoverySettings:
    return RecoverySettings(
        timeout_seconds=env.recovery_timeout_seconds,
        bookie_timeout_seconds=env.recovery_bookie_timeout_seconds,
    )


def read_settings(env: GatewayEnv) -> ReadSettings:
    return ReadSettings(
        speculative_delay_seconds=env.speculative_read_seconds,
        verify_digests=not env.fault_unsafe_skip_digest_check,
        read_your_writes=not env.fault_unsafe_no_read_your_writes,
        owner_lac_timeout_seconds=env.owner_lac_timeout_seconds,
    )


def blob_settings(env: GatewayEnv) -> BlobSettings:
    return BlobSettings(
        ledgers_per_scope=env.blob_ledgers_per_scope,
        ledger_max_bytes=env.blob_ledger_max_bytes,
        ledger_max_age_seconds=env.blob_ledger_max_age_seconds,
    )


def auditor_settings(env: AuditorEnv) -> AuditorSettings:
    return AuditorSettings(
        interval_seconds=env.interval_seconds,
        lost_bookie_delay_seconds=env.lost_bookie_delay_seconds,
        lease_seconds=env.lease_seconds,
        scrub=ScrubSettings(
            entries_per_second=env.scrub_entries_per_second,
            bytes_per_second=env.scrub_bytes_per_second,
            sample_entries=env.scrub_sample_entries,
            pass_interval_seconds=env.scrub_pass_interval_seconds,
        ),
    )
