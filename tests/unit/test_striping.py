from quire_gateway.read.replicas import replicas_of
from quire_gateway.write.handle import write_set
from quire_proto.common.v1 import common_pb2


def test_entry_goes_to_w_consecutive_members():
    ensemble = ["a", "b", "c"]
    assert write_set(0, ensemble, 2) == ["a", "b"]
    assert write_set(1, ensemble, 2) == ["b", "c"]
    assert write_set(2, ensemble, 2) == ["c", "a"]
    assert write_set(4, ensemble, 3) == ["b", "c", "a"]


def test_reads_use_the_ensemble_covering_the_entry():
    metadata = common_pb2.LedgerMetadata(
        write_quorum_size=2,
        ensembles=[
            common_pb2.Ensemble(first_entry_id=0, bookie_ids=["a", "b", "c"]),
            common_pb2.Ensemble(first_entry_id=10, bookie_ids=["a", "d", "c"]),
        ],
    )
    assert replicas_of(metadata, 9) == ["a", "b"]
    # Striping uses the absolute entry id: entry 10 starts at position 10 mod 3 = 1.
    assert replicas_of(metadata, 10) == ["d", "c"]
    assert replicas_of(metadata, 11) == ["c", "a"]
