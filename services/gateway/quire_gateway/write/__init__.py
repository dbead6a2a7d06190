"""The gateway's write path, one file per part (docs/architecture.md, "An append, step by step"):

- `session.py`: one AppendEntries stream: payloads in, acknowledgements out, in entry order;
- `handle.py`: a ledger being written here: ids, packing, striping, the ack quorum and the LAC;
  it drives ensemble changes;
- `bookie_streams.py`: the gateway's one AddStream per bookie, shared by every ledger written
  here: the one owner of batching, flow control and deadlines per bookie;
- `ensemble_change.py`: the rules for replacing, or leaving out, a failed bookie;
- `quarantine.py`: bookies that failed writes lately, avoided by new ensembles;
- `lac_batches.py`: explicit LAC writes of quiet ledgers, gathered per bookie.
"""
