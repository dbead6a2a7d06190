"""Bookie cookies on a MetadataStore. No grpc here."""

from __future__ import annotations

import logging

from quire_api.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    NotFound,
    Reason,
)
from quire_api.ids import (
    validate_bookie_id,
)
from quire_proto.registry.v1 import registry_pb2
from quire_registry.keys import Keys
from quire_registry.store import Delete, MetadataStore

log = logging.getLogger(__name__)


class Cookies:
    """Each bookie's cookie: its identity, checked at boot and removed when
    it is decommissioned."""

    def __init__(self, store: MetadataStore, keys: Keys) -> None:
        self.store = store
        self.keys = keys

    async def get_cookie(self, bookie_id: str) -> tuple[registry_pb2.Cookie, int]:
        validate_bookie_id(bookie_id)
        kv = await self.store.get(self.keys.cookie(bookie_id))
        if kv is None:
            raise NotFound(f"no cookie for bookie {bookie_id}", Reason.BOOKIE_NOT_FOUND)
        return registry_pb2.Cookie.FromString(kv.value), kv.version

    async def put_cookie(self, bookie_id: str, cookie: registry_pb2.Cookie, expected_version: int) -> int:
        validate_bookie_id(bookie_id)
        key = self.keys.cookie(bookie_id)
        if expected_version == 0:
            version = await self.store.create(key, cookie.SerializeToString())
            if version is None:
                raise AlreadyExists(f"bookie {bookie_id} already has a cookie", Reason.COOKIE_EXISTS)
            return version
        version = await self.store.compare_and_swap(key, cookie.SerializeToString(), expected_version)
        if version is None:
            raise Aborted(f"cookie of bookie {bookie_id} changed since version {expected_version}")
        return version

    async def delete_cookie(self, bookie_id: str, expected_version: int) -> None:
        """Remove a decommissioned bookie's cookie, in one transaction that
        also requires the bookie to be unregistered: a bookie registering
        meanwhile keeps its cookie."""
        validate_bookie_id(bookie_id)
        key = self.keys.cookie(bookie_id)
        registrations = [self.keys.writable_bookie(bookie_id), self.keys.readonly_bookie(bookie_id)]
        if await self.store.transact(registrations, {key: expected_version}, [Delete(key)]) is not None:
            log.info("cookie of bookie %s deleted (decommissioned)", bookie_id)
            return
        for registration in registrations:
            if await self.store.get(registration) is not None:
                raise FailedPrecondition(
                    f"bookie {bookie_id} is registered; stop it before removing its cookie",
                    Reason.BOOKIE_ALREADY_REGISTERED,
                )
        current = await self.store.get(key)
        if current is None:
            raise NotFound(f"no cookie for bookie {bookie_id}", Reason.BOOKIE_NOT_FOUND)
        raise Aborted(f"cookie of bookie {bookie_id} changed since version {expected_version}")
