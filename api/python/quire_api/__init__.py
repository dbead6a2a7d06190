"""What every Quire client and service shares to speak the API: error reasons and
classes, the status codec, ids, limits, replication helpers, the bookie address rules
and the backoff policy of retries."""
