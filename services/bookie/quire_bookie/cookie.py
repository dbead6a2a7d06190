"""Bookie identity: the cookie, written on first boot and checked at every boot.

A bookie's identity is a pair that must agree: the cookie file in its data
directory (which BookieId and which data set this directory is) and the cookie
the registry keeps under the BookieId (which data set that id belongs to). The
check refuses to boot

- existing data under a different BookieId (the directory's cookie names
  another id): ledger metadata would point at a bookie that no longer has them;
- an existing BookieId on a wiped or different data directory (the registry
  knows the id, the directory has no cookie or another data set's): the
  bookie would answer "not here" for entries it once acknowledged.

The decision is `check_identity`, pure over what was read; `check_cookie` reads
both sides and writes what a first boot needs. No grpc here: the registry is
reached through the CookieRegistry protocol.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from quire_api.backoff import Backoff
from quire_api.errors import AlreadyExists, Unavailable
from quire_common.config import ConfigError

log = logging.getLogger(__name__)

COOKIE_FILE = "COOKIE"
_LAYOUT_VERSION = 1


@dataclass(frozen=True)
class Cookie:
    """What a cookie says: the data set's random id and its directories.
    The local copy also names the BookieId it was formatted for."""

    instance_id: str
    data_dirs: tuple[str, ...]
    bookie_id: str = ""


class CookieError(ConfigError):
    """The data directory and the BookieId do not belong together."""


class CookieRegistry(Protocol):
    async def get(self, bookie_id: str) -> tuple[Cookie, int] | None: ...

    async def create(self, bookie_id: str, cookie: Cookie) -> None: ...


def read_local(data_dir: Path) -> Cookie | None:
    path = data_dir / COOKIE_FILE
    try:
        data = json.loads(path.read_text())
        return Cookie(data["instance_id"], tuple(data["data_dirs"]), data["bookie_id"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CookieError(f"cookie file {path} is unreadable ({exc}); refusing to guess whose data this is") from None


def write_local(data_dir: Path, cookie: Cookie) -> None:
    """Write the cookie file atomically and durably (temp file, fsync, rename,
    fsync of the directory), so a crash leaves the old file or the new one."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path, temporary = data_dir / COOKIE_FILE, data_dir / (COOKIE_FILE + ".tmp")
    body = {
        "layout": _LAYOUT_VERSION,
        "bookie_id": cookie.bookie_id,
        "instance_id": cookie.instance_id,
        "data_dirs": list(cookie.data_dirs),
    }
    with temporary.open("w") as handle:
        json.dump(body, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def check_identity(bookie_id: str, data_dirs: tuple[str, ...], local: Cookie | None, registered: Cookie | None) -> str:
    """What to do at boot: "format" (a new bookie), "publish" (the directory's
    cookie is good but the registry lost its copy), or "ok". Raises CookieError
    with the reason when the two sides do not belong together."""
    where = ", ".join(data_dirs)
    if local is not None and local.bookie_id != bookie_id:
        raise CookieError(
            f"data directory {where} holds the data of bookie {local.bookie_id!r}, but this bookie is configured "
            f"as {bookie_id!r}; booting existing data under a different BookieId is refused. Set "
            f"QUIRE_BOOKIE_ID={local.bookie_id} again, or give this id a new data directory"
        )
    if local is None and registered is None:
        return "format"
    if local is None:
        assert registered is not None
        raise CookieError(
            f"bookie {bookie_id!r} is known to the registry (data set {registered.instance_id}) but data "
            f"directory {where} has no cookie: it was wiped or is not this bookie's directory, so the entries "
            f"this bookie acknowledged are not here. Refusing to boot an existing BookieId on an empty data "
            "directory; restore the directory, or start with a new BookieId"
        )
    if registered is None:
        return "publish"
    if local.instance_id != registered.instance_id:
        raise CookieError(
            f"data directory {where} holds data set {local.instance_id}, but the registry says bookie "
            f"{bookie_id!r} is data set {registered.instance_id}: another data directory owns this BookieId"
        )
    if tuple(sorted(local.data_dirs)) != tuple(sorted(data_dirs)) or tuple(sorted(registered.data_dirs)) != tuple(
        sorted(data_dirs)
    ):
        raise CookieError(
            f"bookie {bookie_id!r} was formatted with data directories {', '.join(registered.data_dirs)} "
            f"but is configured with {where}; move the directories back or reconfigure"
        )
    return "ok"


async def check_cookie(
    registry: CookieRegistry, bookie_id: str, data_dirs: list[Path], wait_seconds: float = 30.0
) -> Cookie:
    """Check this bookie's identity against the registry, formatting a new
    bookie on first boot. Waits up to `wait_seconds` for the registry; raises
    CookieError (or Unavailable) rather than boot a mismatched bookie."""
    dirs = tuple(str(d.resolve()) for d in data_dirs)
    local = read_local(data_dirs[0])
    registered = await _with_retries(lambda: registry.get(bookie_id), wait_seconds)
    action = check_identity(bookie_id, dirs, local, registered[0] if registered else None)
    if action == "format":
        cookie = Cookie(uuid.uuid4().hex, dirs, bookie_id)
        # The directory first: if we crash before the registry has its copy,
        # the next boot finds the file and publishes it ("publish" below).
        for data_dir in data_dirs:
            write_local(data_dir, cookie)
        await _create(registry, bookie_id, cookie, wait_seconds)
        log.info("formatted new bookie %s (data set %s)", bookie_id, cookie.instance_id)
        return cookie
    assert local is not None
    if action == "publish":
        log.warning("the registry has no cookie for bookie %s; publishing the data directory's", bookie_id)
        await _create(registry, bookie_id, local, wait_seconds)
    return local


async def _create(registry: CookieRegistry, bookie_id: str, cookie: Cookie, wait_seconds: float) -> None:
    try:
        await _with_retries(lambda: registry.create(bookie_id, cookie), wait_seconds)
    except AlreadyExists:
        raise CookieError(
            f"another process registered a cookie for bookie {bookie_id!r} while this one was formatting; "
            "two bookies are configured with the same BookieId"
        ) from None


async def _with_retries(operation, wait_seconds: float):  # type: ignore[no-untyped-def]
    """Retry while the registry is unreachable, up to `wait_seconds`."""
    pauses = Backoff(first_seconds=0.2, longest_seconds=2.0, within_seconds=wait_seconds).pauses()
    while True:
        try:
            return await operation()
        except Unavailable as exc:
            pause = next(pauses, None)
            if pause is None:
                raise Unavailable(f"cannot check this bookie's cookie: {exc}") from None
            log.warning("registry unreachable for the cookie check (%s); retrying", exc)
            await asyncio.sleep(pause)
