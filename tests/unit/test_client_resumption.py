"""quire_client.protocol's resumption bookkeeping, shared by the sync and the
asyncio client: what a failed write session or read leads to."""

from __future__ import annotations

import grpc
import pytest

from quire_api.ids import LedgerId
from quire_client.errors import FailedPreconditionError, NotFoundError, UnavailableError
from quire_client.protocol import ReadResumption, WriteResumption
from quire_client.results import AppendAck
from quire_proto.gateway.v1 import ledger_pb2

LEDGER = LedgerId(1, 2)


def unavailable() -> UnavailableError:
    return UnavailableError(grpc.StatusCode.UNAVAILABLE, "", "connection reset")


def refused(next_entry_id: int, last_add_confirmed: int) -> FailedPreconditionError:
    details = {"next_entry_id": str(next_entry_id), "last_add_confirmed": str(last_add_confirmed)}
    return FailedPreconditionError(
        grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_UNEXPECTED_ENTRY_ID", "unexpected", details
    )


def session_with_five_unacked(sent_from: int = 10) -> WriteResumption:
    progress = WriteResumption(LEDGER, conditional=True, resume_attempts=5)
    progress.next_id = sent_from
    progress.unacked.extend([b"a", b"b", b"c", b"d", b"e"])
    return progress


def test_an_acknowledgement_settles_its_entries_and_names_the_owner() -> None:
    progress = session_with_five_unacked()
    answer = ledger_pb2.AppendEntriesResponse(first_entry_id=10, last_entry_id=11, last_add_confirmed=11)
    answer.owner.address = "gw-1:7000"
    assert progress.acknowledged(answer) == AppendAck(10, 11, 11)
    assert list(progress.unacked) == [b"c", b"d", b"e"] and progress.next_id == 12 and progress.settled == 2
    assert progress.owner_address == "gw-1:7000"
    assert progress.first_request().expected_entry_id == 12


def test_a_lost_gateway_resumes_at_the_next_one_with_the_condition() -> None:
    progress = session_with_five_unacked()
    resume = progress.after_failure(unavailable())
    assert resume.next_gateway and resume.landed is None
    assert progress.first_request().expected_entry_id == 10 and len(progress.unacked) == 5


def test_entries_that_landed_are_acknowledged_once_confirmed_and_not_sent_again() -> None:
    progress = session_with_five_unacked()
    waiting = progress.after_failure(refused(next_entry_id=13, last_add_confirmed=11))  # not confirmed yet
    assert waiting.landed is None and not waiting.next_gateway and len(progress.unacked) == 5
    resume = progress.after_failure(refused(next_entry_id=13, last_add_confirmed=12))
    assert resume.landed == AppendAck(10, 12, 12) and resume.pause == 0
    assert list(progress.unacked) == [b"d", b"e"] and progress.next_id == 13


def test_more_entries_than_were_sent_means_another_writer() -> None:
    progress = session_with_five_unacked()
    with pytest.raises(FailedPreconditionError, match="another writer"):
        progress.after_failure(refused(next_entry_id=16, last_add_confirmed=15))


def test_a_final_error_or_too_many_attempts_ends_the_append() -> None:
    progress = session_with_five_unacked()
    with pytest.raises(NotFoundError):
        progress.after_failure(NotFoundError(grpc.StatusCode.NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND", "gone"))
    progress = session_with_five_unacked()
    for _ in range(5):
        progress.after_failure(unavailable())
    with pytest.raises(UnavailableError):
        progress.after_failure(unavailable())


def test_a_refusal_without_the_condition_is_not_resumed() -> None:
    progress = WriteResumption(LEDGER, conditional=False, resume_attempts=5)
    assert not progress.first_request().HasField("expected_entry_id")
    with pytest.raises(FailedPreconditionError):
        progress.after_failure(refused(next_entry_id=3, last_add_confirmed=2))


def test_a_read_resumes_after_the_last_entry_delivered() -> None:
    progress = ReadResumption(0, -1, resume_attempts=3, single_gateway=False)
    progress.answered()
    assert [entry for entry in (0, 1, 2) if progress.fresh(entry)] == [0, 1, 2]
    resume = progress.after_failure(unavailable())
    assert resume is not None and resume.next_gateway and progress.next_id == 3
    assert [entry for entry in (1, 2, 3) if progress.fresh(entry)] == [3]  # the new stream's repeats are skipped


def test_a_read_that_had_everything_ends_and_a_lone_gateway_refusing_raises() -> None:
    done = ReadResumption(0, 1, resume_attempts=3, single_gateway=False)
    done.answered()
    done.fresh(0), done.fresh(1)
    assert done.after_failure(unavailable()) is None
    with pytest.raises(UnavailableError):
        ReadResumption(0, -1, resume_attempts=3, single_gateway=True).after_failure(unavailable())
