"""The gateway: Quire's public API and BookKeeper's client role."""
