"""Freed memory handed back to the OS (services/common/quire_common/memory.py):
without the call glibc keeps what a cache freed, with it the RSS falls."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quire_common.memory import give_back_free_memory

_SCRIPT = """
import json, os
from quire_common.memory import give_back_free_memory

def rss_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

cache, kept = {}, []
for n in range(50_000):
    cache[n] = os.urandom(1024)  # a cache of 1 KiB entries, about 50 MiB
    if n % 100 == 0:
        kept.append(os.urandom(700))  # what outlives it, scattered between them
filled = rss_mib()
cache.clear()
freed = rss_mib()
given_back = give_back_free_memory()
print(json.dumps({"filled": filled, "freed": freed, "trimmed": rss_mib(), "given_back": given_back}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_freed_cache_stays_in_the_rss_until_given_back():
    run = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True, timeout=120)
    rss = json.loads(run.stdout)
    assert rss["given_back"]
    assert rss["filled"] - rss["freed"] < 20, f"freeing alone kept most of it: {rss}"  # the control
    assert rss["freed"] - rss["trimmed"] > 30, f"the trim gave back too little: {rss}"


def test_giving_back_is_safe_to_repeat():
    assert give_back_free_memory() == give_back_free_memory()


_CHURN = """
import json, resource, sys
from quire_common.memory import keep_heap_slack

slack = sys.argv[1] == "slack" and keep_heap_slack()

def page_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

large = bytes(3 << 20)  # a block above glibc's first mmap threshold, freed: its own thresholds move
del large
before = page_faults()
for _ in range(100):  # 10 MiB of 64 KiB buffers taken and freed together, as a loaded gateway does
    buffers = [bytes(64 * 1024) for _ in range(160)]
    del buffers
print(json.dumps({"slack": slack, "page_faults": page_faults() - before}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_heap_that_keeps_its_slack_does_not_fault_its_pages_in_again():
    def churn(mode: str) -> dict[str, object]:
        run = subprocess.run(
            [sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True, timeout=120
        )
        return json.loads(run.stdout)  # type: ignore[no-any-return]

    default, slack = churn("default"), churn("slack")
    assert slack["slack"] is True
    # Without it glibc gives the 10 MiB back after every round and faults them in again (the control).
    assert default["page_faults"] > 50 * 2560, default
    assert slack["page_faults"] < 5 * 2560, slack
