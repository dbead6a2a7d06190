// A read and a tail through a gateway that is killed mid-stream resume at
// the next gateway from their next entry: every entry once, in order.
// QUIRE_GATEWAYS="owner,other" and QUIRE_KILL_GATEWAY_PID (the other's pid)
// come from tests/e2e/test_node_client.py.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { QuireClient, type Entry } from "../src";

const gateways = (process.env.QUIRE_GATEWAYS ?? "").split(",").filter(Boolean);
const killPid = Number(process.env.QUIRE_KILL_GATEWAY_PID ?? 0);
const skip = gateways.length === 2 && killPid ? false : "QUIRE_GATEWAYS and QUIRE_KILL_GATEWAY_PID are not set";

test("reads and tails survive the death of their gateway", { skip, timeout: 420_000 }, async () => {
  const [owner, other] = gateways;
  const writer = new QuireClient(owner);
  // Reads start on `other` and fail over to `owner`.
  const reader = new QuireClient(other, { gateways: [owner], resumeAttempts: 10 });
  try {
    const closed = (await writer.createLedger()).ledgerId;
    const payload = (i: number) => Buffer.concat([Buffer.from(`${i}:`), Buffer.alloc(8 * 1024, i % 256)]);
    const count = 1500;
    await writer.appendAll(closed, Array.from({ length: count }, (_, i) => payload(i)), { batchSize: 50 });
    await writer.closeLedger(closed);
    const live = (await writer.createLedger()).ledgerId;
    for (let i = 0; i < 5; i++) await writer.addEntry(live, `live ${i}`);

    let killed = false;
    const kill = () => {
      if (!killed) process.kill(killPid, "SIGKILL");
      killed = true;
    };
    let readStarted!: () => void;
    let tailStarted!: () => void;
    const bothStarted = Promise.all([
      new Promise<void>((resolve) => (readStarted = resolve)),
      new Promise<void>((resolve) => (tailStarted = resolve)),
    ]).then(kill);

    const readIds: number[] = [];
    let readMismatch = "";
    const reading = (async () => {
      for await (const entry of reader.read(closed)) {
        if (!entry.payload.equals(payload(entry.entryId))) readMismatch ||= `entry ${entry.entryId}`;
        readIds.push(entry.entryId);
        if (readIds.length === 1) {
          readStarted();
          await bothStarted; // hold the stream open until the gateway is gone
        }
      }
    })();
    const tailed: Entry[] = [];
    const tailing = (async () => {
      for await (const entry of reader.tail(live)) {
        tailed.push(entry);
        if (tailed.length === 1) {
          tailStarted();
          await bothStarted;
        }
      }
    })();

    await bothStarted;
    for (let i = 5; i < 10; i++) await writer.addEntry(live, `live ${i}`);
    await writer.closeLedger(live);
    await Promise.all([reading, tailing]);

    assert.ok(killed);
    assert.equal(reader.gateway, owner, "the reads moved to the surviving gateway");
    assert.equal(readMismatch, "");
    assert.deepEqual(readIds, Array.from({ length: count }, (_, i) => i));
    assert.deepEqual(tailed.map((e) => e.payload.toString()), Array.from({ length: 10 }, (_, i) => `live ${i}`));
  } finally {
    writer.close();
    reader.close();
  }
});
