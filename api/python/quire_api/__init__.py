"""What every Quire client and service shares to speak the API: error reasons and
classes, the status codec, ids, limits, replication helpers and the bookie address rules."""
