// LedgerWriter against an in-process gateway (test/support/fakeGateway.ts):
// a session that breaks is resumed with a conditional append, so every entry
// is stored once and in order; entries another writer appended are not taken
// for ours; and the Writable's callbacks hold the entries in flight within
// bounds, so pipeline() waits for the gateway.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { FailedPreconditionError, LedgerId, QuireClient, type AppendAck } from "../src";
import { FakeGateway } from "./support/fakeGateway";

const ledger = new LedgerId(0n, 1n);
let fake: FakeGateway;
let client: QuireClient;

before(async () => {
  fake = await new FakeGateway().start();
});
after(() => fake.stop());

function fresh(): QuireClient {
  fake.stored.length = 0;
  fake.sessions.length = 0;
  fake.foreignOnBreak = [];
  client?.close();
  client = new QuireClient(fake.target, { resumeBackoffMs: [1, 20] });
  return client;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200 && !condition(); i++) await sleep(50);
  assert.ok(condition(), `gave up waiting for ${what}`);
}

const entries = (count: number, prefix = "entry") => Array.from({ length: count }, (_, i) => `${prefix} ${i}`);

test("a broken session resumes with a conditional append: each entry stored once, in order", async () => {
  fresh();
  fake.breakSessionAfter = 120; // stored 0..119, the last batch of ten never acknowledged
  const payloads = entries(500);
  const acks: AppendAck[] = [];
  const writer = client.writer(ledger, { batchSize: 10, onAck: (ack) => acks.push(ack) });
  await pipeline(Readable.from(payloads), writer);
  assert.deepEqual(fake.stored.map(String), payloads);
  assert.equal(writer.lastEntryId, 499);
  assert.ok(writer.resumptions >= 2, `resumptions ${writer.resumptions}`);
  assert.ok(writer.landedOnResume >= 10, `landed ${writer.landedOnResume}`);
  // The first session asked for the next id (0); every later one for the first entry it had not seen acknowledged.
  assert.equal(fake.sessions[0].expected, 0);
  assert.ok(fake.sessions.slice(1).every((s) => s.expected !== undefined && s.expected <= 120), JSON.stringify(fake.sessions));
  assert.equal(fake.sessions.at(-1)?.expected, 120);
  // Acknowledgements (the landed ones included) cover every id once, in order.
  const covered = acks.flatMap((a) => Array.from({ length: a.lastEntryId - a.firstEntryId + 1 }, (_, i) => a.firstEntryId + i));
  assert.deepEqual(covered, payloads.map((_, i) => i));
});

test("entries another writer appended meanwhile are not taken for this writer's", async () => {
  fresh();
  fake.breakSessionAfter = 20;
  fake.foreignOnBreak = entries(50, "foreign").map((p) => Buffer.from(p));
  const writer = client.writer(ledger, { batchSize: 10 });
  await assert.rejects(pipeline(Readable.from(entries(30)), writer), (error) => {
    assert.ok(error instanceof FailedPreconditionError, String(error));
    assert.equal(error.reason, "ERROR_REASON_UNEXPECTED_ENTRY_ID");
    assert.match(error.message, /another writer wrote ledger/);
    return true;
  });
  assert.deepEqual(fake.stored.slice(0, 20).map(String), entries(20)); // nothing of ours written again
  assert.equal(fake.stored.length, 70);
});

test("with followOwner a broken session resumes at the owner its acknowledgements named", async () => {
  fresh();
  const owner = await new FakeGateway(fake.stored).start(); // the same ledger, at another address
  fake.ownerAddress = owner.target;
  fake.breakSessionAfter = 40;
  const following = new QuireClient(fake.target, { followOwner: true, resumeBackoffMs: [1, 20] });
  try {
    const writer = following.writer(ledger, { batchSize: 10 });
    await pipeline(Readable.from(entries(200)), writer);
    assert.deepEqual(fake.stored.map(String), entries(200));
    assert.equal(following.gateway, owner.target);
    assert.equal(fake.sessions.length, 1);
    assert.ok(owner.sessions.length >= 1);
  } finally {
    fake.ownerAddress = "";
    following.close();
    owner.stop();
  }
});

test("write callbacks wait for acknowledgements: entries in flight stay bounded", async () => {
  fresh();
  fake.withholdAcks = true;
  const payloads = entries(500);
  const writer = client.writer(ledger, { maxInFlightEntries: 50, highWaterMark: 4, batchSize: 10 });
  let finished = false;
  const done = pipeline(Readable.from(payloads), writer).then(() => (finished = true));
  await until(() => writer.backPressureWaits > 0 && fake.stored.length >= 50, "the writer to wait for acknowledgements");
  await sleep(300); // time for a writer that ignored the bound to run ahead
  assert.ok(fake.stored.length <= 50 + 4 + 1, `${fake.stored.length} entries in flight, bound 50 (+ one write of up to 5)`);
  assert.equal(finished, false);
  assert.equal(writer.lastEntryId, -1);
  fake.release();
  await done;
  assert.deepEqual(fake.stored.map(String), payloads);
  assert.equal(writer.lastEntryId, 499);
});

test("append() and close(): the promise API of the same writer", async () => {
  fresh();
  const writer = client.writer(ledger, { expectedEntryId: 0 });
  for (const payload of entries(25)) await writer.append(payload);
  assert.equal(await writer.close(), 24);
  assert.deepEqual(fake.stored.map(String), entries(25));
  assert.equal(fake.sessions[0].expected, 0);
  assert.throws(() => client.writer(ledger, { batchSize: 0 }), RangeError);
});

test("a chunk that is not a payload fails the write with a TypeError", async () => {
  fresh();
  const writer = client.writer(ledger);
  await assert.rejects(writer.append(42 as unknown as string), TypeError);
  assert.equal(fake.stored.length, 0);
});

after(() => client?.close());
