"""The etcd key layout, in one place. Everything lives under /quire/<cluster>/."""

from __future__ import annotations

from quire_api.ids import LedgerId


class Keys:
    def __init__(self, cluster: str) -> None:
        self.root = f"/quire/{cluster}/".encode()

    @property
    def bookies(self) -> bytes:
        return self.root + b"bookies/"

    @property
    def writable_bookies(self) -> bytes:
        return self.root + b"bookies/writable/"

    @property
    def readonly_bookies(self) -> bytes:
        return self.root + b"bookies/readonly/"

    def writable_bookie(self, bookie_id: str) -> bytes:
        return self.writable_bookies + bookie_id.encode()

    def readonly_bookie(self, bookie_id: str) -> bytes:
        return self.readonly_bookies + bookie_id.encode()

    def cookie(self, bookie_id: str) -> bytes:
        return self.root + b"cookies/" + bookie_id.encode()

    @property
    def ledgers(self) -> bytes:
        return self.root + b"ledgers/"

    def ledger(self, ledger_id: LedgerId) -> bytes:
        return self.ledgers + ledger_id.qualified_name.encode()

    def scope_ledgers(self, scope_id: int) -> bytes:
        """Prefix of every ledger in a scope: the first 16 hex digits (and two
        dashes) of the qualified name are the scope."""
        return self.ledgers + LedgerId(scope_id, 0).qualified_name[:19].encode()

    def create_request(self, request_id: str) -> bytes:
        """Which ledger a CreateLedger request_id made (written with the ledger, deleted with it)."""
        return self.root + b"create-requests/" + request_id.encode()

    @property
    def legacy_id_generator(self) -> bytes:
        return self.root + b"idgen/legacy"

    @property
    def load_weights(self) -> bytes:
        return self.root + b"placement/load/"

    def load_weight(self, bookie_id: str) -> bytes:
        return self.load_weights + bookie_id.encode()

    @property
    def cluster(self) -> bytes:
        return self.root + b"cluster"

    def leader(self, role: str) -> bytes:
        """Who holds a cluster-wide role (the auditor); on the holder's lease."""
        return self.root + b"leaders/" + role.encode()
