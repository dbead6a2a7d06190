"""The bookie service: durable entry storage in RocksDB."""
