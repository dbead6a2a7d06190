"""`quire cluster status`'s verdict (pure): which reports are healthy, which degraded and why."""

from __future__ import annotations

from quire_client.cli.status import DEGRADED, HEALTHY, judge
from quire_proto.admin.v1 import admin_pb2

NOW = 1_800_000_000.0


def healthy_report() -> admin_pb2.GetClusterStatusResponse:
    report = admin_pb2.GetClusterStatusResponse(writable_bookies=3, largest_ensemble=3, auditor="gw-1")
    for service in ("gateway", "registry", "placement"):
        report.services.add(service=service, address=f"{service}:1", health="SERVING", version="0.1.0")
    for n in range(3):
        report.services.add(service="bookie", address=f"b{n}:1", health="SERVING", bookie_state="writable")
    report.certificates.add(certificate="service").not_after.FromSeconds(int(NOW + 90 * 86400))
    return report


def test_a_cluster_with_nothing_wrong_is_healthy() -> None:
    assert judge(healthy_report(), NOW).status == HEALTHY


def test_each_problem_makes_it_degraded_and_is_named() -> None:
    def degraded_by(change) -> list[str]:  # type: ignore[no-untyped-def]
        report = healthy_report()
        change(report)
        verdict = judge(report, NOW)
        assert verdict.status == DEGRADED
        return verdict.problems

    assert "bookie b0:1 is UNREACHABLE: gone" in degraded_by(
        lambda r: (setattr(r.services[3], "health", "UNREACHABLE"), setattr(r.services[3], "detail", "gone"))
    )
    assert "bookie b1:1 is read-only" in degraded_by(lambda r: setattr(r.services[4], "bookie_state", "read-only"))
    assert "fewer than the largest ensemble" in degraded_by(lambda r: setattr(r, "largest_ensemble", 4))[0]
    assert "b9:1" in degraded_by(lambda r: r.missing_bookie_ids.append("b9:1"))[0]
    assert "wait for repair" in degraded_by(lambda r: setattr(r, "under_replicated_segments", 2))[0]
    assert "auditor" in degraded_by(lambda r: setattr(r, "auditor", ""))[0]
    assert (
        "expires in 3.0 days" in degraded_by(lambda r: r.certificates[0].not_after.FromSeconds(int(NOW + 3 * 86400)))[0]
    )


def test_no_auditor_is_not_blamed_when_the_registry_that_knows_it_is_down() -> None:
    report = healthy_report()
    report.services[1].health = "UNREACHABLE"
    report.auditor = ""
    assert judge(report, NOW).problems == ["registry registry:1 is UNREACHABLE"]
