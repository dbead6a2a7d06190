"""Quire's shared server runtime: entry codec, config, channels, telemetry, security, server bootstrap."""
