"""The read path: a ledger's confirmed and unconfirmed reads and tails
(ledger_reads.py), the replica reads under them (replicas.py), the entry
cache in front of the bookies (entry_cache.py) and the LAC as the bookies
know it (bookie_lac.py). Nothing here imports the write path or the
autorecovery: what a read needs of a ledger written here (its writer's LAC)
is handed in."""
