"""The registry's domain behind one object for the servicer: each resource
lives in a module of its own, on the same MetadataStore and key layout
(bookies.py: registrations; cookies.py; load_weights.py; ledger_records.py:
ledger metadata and ids; elections.py: roles). No grpc here."""

from __future__ import annotations

from quire_registry.bookies import BookieRegistrations
from quire_registry.cookies import Cookies
from quire_registry.keys import Keys
from quire_registry.ledger_records import LedgerRecords
from quire_registry.load_weights import LoadWeights
from quire_registry.store import MetadataStore
from quire_registry.streams import OpenStreams


class Registry:
    def __init__(
        self,
        store: MetadataStore,
        cluster: str,
        default_ttl_seconds: int = 10,
        recognise_request_ids: bool = True,
        keep_ledger_passwords: bool = False,
    ) -> None:
        self.store = store
        self.keys = Keys(cluster)
        self.bookies = BookieRegistrations(store, self.keys, default_ttl_seconds)
        self.cookies = Cookies(store, self.keys)
        self.load_weights = LoadWeights(store, self.keys)
        self.ledgers = LedgerRecords(store, self.keys, recognise_request_ids, keep_ledger_passwords)
        self.streams = OpenStreams()  # the open-ended ones: registrations and watches
        # The servicer's calls, by resource.
        self.register_bookie = self.bookies.register_bookie
        self.heartbeat = self.bookies.heartbeat
        self.unregister_bookie = self.bookies.unregister_bookie
        self.registration_stream = self.bookies.registration_stream
        self.list_bookies = self.bookies.list_bookies
        self.watch_bookies = self.bookies.watch_bookies
        self.get_bookie = self.bookies.get_bookie
        self.get_cookie = self.cookies.get_cookie
        self.put_cookie = self.cookies.put_cookie
        self.delete_cookie = self.cookies.delete_cookie
        self.put_load_weights = self.load_weights.put_load_weights
        self.list_load_weights = self.load_weights.list_load_weights
        self.create_ledger = self.ledgers.create_ledger
        self.create_ledgers = self.ledgers.create_ledgers
        self.get_ledger = self.ledgers.get_ledger
        self.update_ledger = self.ledgers.update_ledger
        self.delete_ledger = self.ledgers.delete_ledger
        self.watch_ledgers = self.ledgers.watch_ledgers
        self.list_ledgers = self.ledgers.list_ledgers
        self.list_ledger_ids = self.ledgers.list_ledger_ids

    async def stopping(self) -> None:
        """The process has begun to stop (before its calls drain): the
        registrations and watches end now, their leases left to resume."""
        self.bookies.leave_leases_to_resume()
        self.streams.end_all()

    @property
    def keep_ledger_passwords(self) -> bool:
        """QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS (ledger_records.py)."""
        return self.ledgers.keep_ledger_passwords

    @keep_ledger_passwords.setter
    def keep_ledger_passwords(self, keep: bool) -> None:
        self.ledgers.keep_ledger_passwords = keep
