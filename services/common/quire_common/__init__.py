"""Quire's shared runtime: ids, entry codec, errors, config, telemetry, server bootstrap."""
