"""Autorecovery: the auditor (re-replication of lost bookies' segments,
repair of marked copies; one per cluster, by lease) and its scrub (checks of
every bookie's copies). Marking copies for repair (repairs.py) and holding a
cluster-wide role (roles.py) stay below: readers mark damaged copies,
and a gateway's lease is a role too."""
