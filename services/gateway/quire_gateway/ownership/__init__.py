"""Who writes a ledger: this gateway's registry lease (lease.py: the owner
named in the ledgers it creates; whether another owner's lease lives), the
gateway mesh (peers.py: calls to other gateways, marked as relayed) and the
relay of a write, or of a reader's LAC question, to the ledger's owner
(forwarding.py)."""
