"""Cookies through a real registry server and etcd."""

from __future__ import annotations

import pytest

from quire_bookie.cookie import CookieError, check_cookie, read_local
from quire_bookie.registration import RegistryCookies

pytestmark = pytest.mark.integration


@pytest.fixture
async def cookies(registry_server):
    _, target = registry_server
    client = RegistryCookies(target)
    yield client
    await client.close()


async def test_first_boot_writes_both_copies_and_later_boots_agree(cookies, tmp_path):
    formatted = await check_cookie(cookies, "bookie-x", [tmp_path])
    assert read_local(tmp_path) == formatted
    stored = await cookies.get("bookie-x")
    assert stored is not None and stored[0].instance_id == formatted.instance_id
    assert await check_cookie(cookies, "bookie-x", [tmp_path]) == formatted


async def test_a_crash_between_the_two_writes_is_completed_on_next_boot(cookies, registry_server, tmp_path):
    from quire_bookie.cookie import Cookie, write_local

    write_local(tmp_path, Cookie("half-done", (str(tmp_path.resolve()),), "bookie-y"))
    assert await cookies.get("bookie-y") is None
    await check_cookie(cookies, "bookie-y", [tmp_path])
    stored = await cookies.get("bookie-y")
    assert stored is not None and stored[0].instance_id == "half-done"


async def test_a_second_directory_for_a_known_id_is_refused(cookies, tmp_path):
    await check_cookie(cookies, "bookie-z", [tmp_path / "first"])
    with pytest.raises(CookieError, match="empty data directory"):
        await check_cookie(cookies, "bookie-z", [tmp_path / "second"])
    assert read_local(tmp_path / "second") is None  # the refused directory stays untouched
