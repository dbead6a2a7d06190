// Three gateways behind HAProxy (tests/e2e/test_node_client.py starts them):
// a write session through the balancer loses the gateway its connection
// landed on to a SIGKILL, mid-stream, and resumes through the balancer (on
// another gateway) with nothing lost or written twice; a tail through a third
// gateway follows it; and a blob goes through the balancer.
// QUIRE_BALANCER is the balancer's address, QUIRE_GATEWAY_PIDS maps each
// gateway's own address to its pid ("host:port=pid,...").
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { pipeline } from "node:stream/promises";
import { QuireClient } from "../src";

const balancer = process.env.QUIRE_BALANCER ?? "";
const pids = new Map(
  (process.env.QUIRE_GATEWAY_PIDS ?? "")
    .split(",")
    .filter(Boolean)
    .map((pair) => pair.split("=") as [string, string]),
);
const skip = balancer && pids.size === 3 ? false : "QUIRE_BALANCER and QUIRE_GATEWAY_PIDS (three gateways) are not set";

const COUNT = 4000;
const KILL_AT = 1500;
const payload = (i: number) => `balanced ${String(i).padStart(6, "0")} ` + "x".repeat(1000);

test("a write session survives a SIGKILL of the gateway it came through", { skip, timeout: 420_000 }, async (t) => {
  // One connection to the balancer: every call of this client lands on the same gateway.
  const balanced = new QuireClient(balancer, { resumeAttempts: 30, timeoutMs: 60_000 });
  // A ledger created through it is owned by that gateway: so we learn which one it is.
  const landed = (await balanced.createLedger()).owner?.address ?? "";
  assert.ok(pids.has(landed), `the balancer sent us to ${landed}, not one of ${[...pids.keys()]}`);
  const [owner, third] = [...pids.keys()].filter((address) => address !== landed);
  const atOwner = new QuireClient(owner, { timeoutMs: 60_000 });
  const atThird = new QuireClient(third, { timeoutMs: 60_000 });
  const stopTail = new AbortController();
  try {
    const { ledgerId, owner: created } = await atOwner.createLedger();
    assert.equal(created?.address, owner);

    const tailed: string[] = [];
    const tailing = (async () => {
      for await (const entry of atThird.tail(ledgerId, { signal: stopTail.signal })) tailed.push(entry.payload.toString());
    })();
    tailing.catch(() => undefined); // awaited below; a failed test stops it

    let killed = false;
    async function* produce() {
      for (let i = 0; i < COUNT; i++) {
        if (i === KILL_AT) {
          process.kill(Number(pids.get(landed)), "SIGKILL"); // entries up to here are in flight or acknowledged
          killed = true;
        }
        yield payload(i);
      }
    }
    // Through the landed gateway, which relays to the owner, until it dies.
    const writer = balanced.writer(ledgerId, { batchSize: 20 });
    await pipeline(produce(), writer);
    assert.ok(killed);
    t.diagnostic(`resumptions ${writer.resumptions}, found stored on resume ${writer.landedOnResume}`);
    assert.ok(writer.resumptions >= 1, "the kill did not end the session");
    assert.equal(writer.lastEntryId, COUNT - 1);

    assert.equal((await balanced.closeLedger(ledgerId)).lastEntryId, COUNT - 1);
    await tailing;
    const stored: string[] = [];
    for await (const entry of balanced.read(ledgerId)) stored.push(entry.payload.toString());
    const expected = Array.from({ length: COUNT }, (_, i) => payload(i));
    assert.equal(new Set(stored).size, stored.length, "an entry was written twice");
    assert.deepEqual(stored, expected); // none lost, none twice, in order
    assert.deepEqual(tailed, expected);

    const blob = Buffer.alloc(2 * 1024 * 1024 + 3, 7);
    const blobId = await balanced.putBlob(blob, { partBytes: 256 * 1024 });
    assert.ok((await atThird.getBlob(blobId)).equals(blob));
  } finally {
    stopTail.abort(); // a failed assertion must not leave the tail waiting for a close
    balanced.close();
    atOwner.close();
    atThird.close();
  }
});
