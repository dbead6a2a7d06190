"""The boot-time identity decision (pure) and the cookie file."""

from __future__ import annotations

import pytest

from quire_bookie.cookie import Cookie, CookieError, check_identity, read_local, write_local

DIRS = ("/data/bookie",)
MINE = Cookie("instance-a", DIRS, "bookie-1")
REGISTERED = Cookie("instance-a", DIRS)


def test_first_boot_formats_and_a_matching_boot_passes():
    assert check_identity("bookie-1", DIRS, None, None) == "format"
    assert check_identity("bookie-1", DIRS, MINE, REGISTERED) == "ok"


def test_a_lost_registry_copy_is_published_from_the_directory():
    assert check_identity("bookie-1", DIRS, MINE, None) == "publish"


def test_existing_data_under_another_id_is_refused():
    with pytest.raises(CookieError, match="different BookieId") as refused:
        check_identity("bookie-2", DIRS, MINE, None)
    assert "'bookie-1'" in str(refused.value)


def test_existing_id_on_a_wiped_directory_is_refused():
    with pytest.raises(CookieError, match="empty data directory"):
        check_identity("bookie-1", DIRS, None, REGISTERED)


def test_another_data_set_owning_the_id_is_refused():
    with pytest.raises(CookieError, match="another data directory owns"):
        check_identity("bookie-1", DIRS, MINE, Cookie("instance-b", DIRS))


def test_moved_data_directories_are_refused():
    with pytest.raises(CookieError, match="formatted with data directories"):
        check_identity("bookie-1", ("/elsewhere",), Cookie("instance-a", DIRS, "bookie-1"), REGISTERED)


def test_cookie_file_round_trip_and_corruption(tmp_path):
    assert read_local(tmp_path) is None
    write_local(tmp_path, MINE)
    assert read_local(tmp_path) == MINE
    (tmp_path / "COOKIE").write_text("{not json")
    with pytest.raises(CookieError, match="unreadable"):
        read_local(tmp_path)
