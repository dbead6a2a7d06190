"""Read-only decisions, capacity capping and the load percentiles."""

import pytest

from quire_bookie.bookie import percentile
from quire_bookie.disk import FORCED_REASON, DiskUsage, ReadOnlyPolicy, measure, usage_of


def disk(usage: float) -> DiskUsage:
    return DiskUsage(total_bytes=1000, free_bytes=round(1000 * (1 - usage)), used_bytes=round(1000 * usage))


def test_turns_read_only_at_the_threshold_and_writable_only_below_the_lower_watermark():
    policy = ReadOnlyPolicy(read_only_usage=0.95, writable_usage=0.90)
    assert policy.decide("", disk(0.94)) == ""
    reason = policy.decide("", disk(0.95))
    assert "95.0%" in reason and "threshold 95%" in reason
    assert policy.decide(reason, disk(0.92)) == reason  # between the watermarks: stays read-only
    assert policy.decide("", disk(0.92)) == ""  # ... and a writable bookie stays writable
    assert policy.decide(reason, disk(0.89)) == ""


def test_forced_read_only_ignores_the_disk():
    policy = ReadOnlyPolicy(forced=True)
    assert policy.decide("", disk(0.0)) == FORCED_REASON
    assert policy.decide(FORCED_REASON, disk(0.0)) == FORCED_REASON


def test_dropping_the_forced_setting_lets_the_disk_decide():
    assert ReadOnlyPolicy().decide(FORCED_REASON, disk(0.5)) == ""


@pytest.mark.parametrize("low, high", [(0.96, 0.95), (0.0, 0.5), (0.5, 1.5)])
def test_watermarks_must_be_ordered_fractions(low, high):
    with pytest.raises(ValueError):
        ReadOnlyPolicy(read_only_usage=high, writable_usage=low)


def test_a_capacity_caps_total_and_counts_the_bookies_own_data(tmp_path):
    (tmp_path / "data").write_bytes(b"x" * 3000)
    capped = measure(tmp_path, capacity_bytes=10_000)
    assert capped.total_bytes == 10_000
    assert capped.used_bytes == 3000
    assert capped.free_bytes == 7000
    assert capped.usage == pytest.approx(0.3)
    full = measure(tmp_path, capacity_bytes=2000)
    assert full.free_bytes == 0 and full.usage == 1.0
    uncapped = measure(tmp_path)
    assert uncapped.total_bytes > 10_000 and uncapped.used_bytes == 3000


def test_blocks_reserved_for_others_count_neither_as_used_nor_as_free():
    # A filesystem of 270 GB of which 160 are reserved for another user, 23 used
    # and 12 free to the bookie: its usage is 23 of 35, not 258 of 270.
    disk = usage_of(filesystem_used=23_000, filesystem_free=12_000, bookie_bytes=1_000, capacity_bytes=0)
    assert disk.total_bytes == 35_000 and disk.free_bytes == 12_000
    assert disk.usage == pytest.approx(23 / 35)
    assert ReadOnlyPolicy().decide("", disk) == ""
    # ... and it is full when nothing is free to it, whatever is reserved
    assert usage_of(filesystem_used=23_000, filesystem_free=0, bookie_bytes=1_000, capacity_bytes=0).usage == 1.0


def test_a_capacity_is_capped_by_the_usable_space():
    disk = usage_of(filesystem_used=5_000, filesystem_free=3_000, bookie_bytes=1_000, capacity_bytes=100_000)
    assert disk.total_bytes == 8_000 and disk.free_bytes == 3_000


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.50) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) == 0.0
