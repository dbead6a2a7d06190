// Against a running cluster: QUIRE_GATEWAY names its gateway (tests/e2e/test_node_client.py sets it).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  AbortError,
  DeadlineExceededError,
  FailedPreconditionError,
  LedgerId,
  NotFoundError,
  OutOfRangeError,
  QuireClient,
  QuireError,
  type AppendAck,
  type Entry,
  type LedgerState,
} from "../src";

const gateway = process.env.QUIRE_GATEWAY;
const skip = gateway ? false : "QUIRE_GATEWAY is not set (no cluster to test against)";

function connect(): QuireClient {
  return new QuireClient(gateway as string, { timeoutMs: 30_000 });
}

async function collect(iterable: AsyncIterable<Entry>): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const entry of iterable) out.push(entry);
  return out;
}

test("create, write a session, read back, close", { skip }, async () => {
  const client = connect();
  try {
    const created = await client.createLedger({ scopeId: 7n });
    assert.equal(created.ledgerId.scopeId, 7n);
    assert.equal(created.state, "LEDGER_STATE_OPEN");
    const ledger = created.ledgerId.qualifiedName; // the text form works everywhere an id does
    const payloads = Array.from({ length: 250 }, (_, i) => `entry ${i}`);
    assert.equal(await client.appendAll(ledger, payloads, { batchSize: 40 }), 249);
    const read = await collect(client.read(ledger));
    assert.deepEqual(read.map((e) => e.payload.toString()), payloads);
    assert.deepEqual(read.map((e) => e.entryId), payloads.map((_, i) => i));
    assert.equal(read.at(-1)?.length, payloads.reduce((sum, p) => sum + p.length, 0));
    assert.deepEqual((await collect(client.read(created.ledgerId, { first: 10, last: 12 }))).map((e) => e.entryId), [10, 11, 12]);
    const closed = await client.closeLedger(ledger);
    assert.equal(closed.state, "LEDGER_STATE_CLOSED");
    assert.equal(closed.lastEntryId, 249);
  } finally {
    client.close();
  }
});

test("a writer waits for the gateway and reports every acknowledgement", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    const acked: number[] = [];
    const writer = client.writer(ledgerId, { onAck: (ack) => acked.push(ack.lastEntryId) });
    const payload = Buffer.alloc(64 * 1024, 1);
    for (let i = 0; i < 400; i++) await writer.append(payload);
    assert.equal(await writer.close(), 399);
    assert.equal(acked.at(-1), 399);
    assert.deepEqual(acked, [...acked].sort((a, b) => a - b));
    assert.equal(await client.lastAddConfirmed(ledgerId), 399);
  } finally {
    client.close();
  }
});

test("pipeline() from a generator into a writer: every entry acknowledged, in order, when it resolves", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    const count = 3000;
    async function* produce() {
      for (let i = 0; i < count; i++) yield `piped ${i}`;
    }
    const acks: AppendAck[] = [];
    const writer = client.writer(ledgerId, { maxInFlightEntries: 200 });
    writer.on("ack", (ack: AppendAck) => acks.push(ack));
    await pipeline(produce(), writer);
    assert.equal(writer.lastEntryId, count - 1);
    assert.equal(writer.unacknowledged, 0);
    assert.ok(writer.backPressureWaits > 0, "3000 entries went through a window of 200 without waiting");
    assert.deepEqual(acks.map((a) => a.firstEntryId), [0, ...acks.slice(0, -1).map((a) => a.lastEntryId + 1)]);
    const state: LedgerState = (await client.closeLedger(ledgerId)).state;
    assert.equal(state, "LEDGER_STATE_CLOSED");
    const read = await collect(client.read(ledgerId));
    assert.deepEqual(read.map((e) => e.payload.toString()), Array.from({ length: count }, (_, i) => `piped ${i}`));
  } finally {
    client.close();
  }
});

test("a tail of a live ledger stops on its signal and at its deadline", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    await client.appendAll(ledgerId, Readable.from(["one", "two"]));
    const controller = new AbortController();
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const entry of client.tail(ledgerId, { signal: controller.signal })) {
          seen.push(entry.payload.toString());
          if (seen.length === 2) controller.abort();
        }
      })(),
      (error) => error instanceof AbortError && error.name === "AbortError",
    );
    assert.deepEqual(seen, ["one", "two"]);
    await assert.rejects(collect(client.tail(ledgerId, { timeoutMs: 500 })), (error) => error instanceof DeadlineExceededError);
    await assert.rejects(client.closeLedger(ledgerId, { signal: AbortSignal.abort() }), (error) => error instanceof AbortError);
    assert.equal((await client.ledgerMetadata(ledgerId)).metadata.state, "LEDGER_STATE_OPEN"); // the aborted close never went out
  } finally {
    client.close();
  }
});

test("appendAll cuts large entries into messages of about 1 MiB", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    const payloads = Array.from({ length: 30 }, (_, i) => Buffer.alloc(200 * 1024, i));
    assert.equal(await client.appendAll(ledgerId, payloads), 29);
    const read = await collect(client.read(ledgerId));
    assert.ok(read.every((entry, i) => entry.payload.equals(payloads[i])));
  } finally {
    client.close();
  }
});

test("a 128-bit id past 2^53 round-trips through the gateway", { skip }, async () => {
  const client = connect();
  try {
    const wanted = new LedgerId(0xfedcba9876543210n, (1n << 64n) - 2n - BigInt(process.pid));
    const created = await client.createLedger({ ledgerId: wanted });
    assert.ok(created.ledgerId.equals(wanted));
    await client.addEntry(wanted.qualifiedName, "x");
    const { metadata } = await client.ledgerMetadata({ scopeId: wanted.scopeId, ledgerId: wanted.ledgerId });
    assert.equal(metadata.ledgerId.qualifiedName, wanted.qualifiedName);
    const listed: string[] = [];
    for await (const m of client.listLedgers({ scopeId: wanted.scopeId })) listed.push(m.ledgerId.qualifiedName);
    assert.ok(listed.includes(wanted.qualifiedName));
    await client.deleteLedger(wanted);
    await assert.rejects(client.ledgerMetadata(wanted), (e) => e instanceof NotFoundError && e.reason === "ERROR_REASON_LEDGER_NOT_FOUND");
  } finally {
    client.close();
  }
});

test("a tail follows a live ledger and ends when it is closed", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    const tailed = collect(client.tail(ledgerId));
    for (let i = 0; i < 20; i++) await client.addEntry(ledgerId, `live ${i}`);
    await client.closeLedger(ledgerId);
    assert.deepEqual((await tailed).map((e) => e.payload.toString()), Array.from({ length: 20 }, (_, i) => `live ${i}`));
  } finally {
    client.close();
  }
});

test("errors carry their type, reason and metadata", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    await client.addEntry(ledgerId, "a");
    assert.equal(await client.nextEntryId(ledgerId), 1);
    await assert.rejects(client.addEntry(ledgerId, "b", { expectedEntryId: 5 }), (e) => {
      assert.ok(e instanceof FailedPreconditionError);
      assert.equal(e.reason, "ERROR_REASON_UNEXPECTED_ENTRY_ID");
      assert.equal(e.metadata.next_entry_id, "1");
      assert.equal(e.retryable, false);
      return true;
    });
    await assert.rejects(collect(client.read(ledgerId, { first: 0, last: 3 })), (e) => e instanceof OutOfRangeError && e.reason === "ERROR_REASON_READ_BEYOND_LAC");
    await client.closeLedger(ledgerId);
    const writer = client.writer(ledgerId);
    await assert.rejects(
      (async () => {
        await writer.append("after close");
        await writer.close();
      })(),
      (e) => e instanceof FailedPreconditionError && e.reason === "ERROR_REASON_LEDGER_CLOSED",
    );
  } finally {
    client.close();
  }
});

test("single entries: readEntry, and readEntriesById over one stream with an error in the middle", { skip }, async () => {
  const client = connect();
  try {
    const { ledgerId } = await client.createLedger();
    const payloads = Array.from({ length: 5 }, (_, i) => `single ${i}`);
    assert.equal(await client.appendAll(ledgerId, payloads), 4);
    const one = await client.readEntry(ledgerId, 3);
    assert.equal(one.entryId, 3);
    assert.equal(one.payload.toString(), "single 3");
    assert.equal(one.length, payloads.slice(0, 4).reduce((sum, p) => sum + p.length, 0));
    await assert.rejects(client.readEntry(ledgerId, 9), (e) => {
      assert.ok(e instanceof OutOfRangeError);
      assert.equal(e.reason, "ERROR_REASON_READ_BEYOND_LAC");
      assert.equal(e.metadata.last_add_confirmed, "4");
      return true;
    });
    const missing = new LedgerId(ledgerId.scopeId, ledgerId.ledgerId ^ 1n);
    await assert.rejects(client.readEntry(missing, 0), (e) => e instanceof NotFoundError && e.reason === "ERROR_REASON_LEDGER_NOT_FOUND");

    const answers: Array<Entry | QuireError> = [];
    for await (const answer of client.readEntriesById(ledgerId, [4, 0, 7, 2, 2])) answers.push(answer);
    assert.equal(answers.length, 5);
    const [a, b, beyond, c, d] = answers;
    assert.ok(!(a instanceof QuireError) && !(b instanceof QuireError) && !(c instanceof QuireError) && !(d instanceof QuireError));
    assert.deepEqual([a, b, c, d].map((e) => (e as Entry).payload.toString()), ["single 4", "single 0", "single 2", "single 2"]);
    assert.ok(beyond instanceof OutOfRangeError, String(beyond));
    assert.equal(beyond.reason, "ERROR_REASON_READ_BEYOND_LAC");
    assert.equal(beyond.metadata.last_add_confirmed, "4");
    assert.equal(beyond.retryable, false);

    const many = Array.from({ length: 200 }, (_, i) => (i * 7) % 5); // more than the gateway reads ahead
    const read: string[] = [];
    for await (const answer of client.readEntriesById(ledgerId, many)) read.push((answer as Entry).payload.toString());
    assert.deepEqual(read, many.map((i) => `single ${i}`));
  } finally {
    client.close();
  }
});

test("blobs, small and streamed in parts", { skip }, async () => {
  const client = connect();
  try {
    const small = await client.putBlob("hello blob", { scopeId: 3 });
    assert.equal((await client.getBlob(small)).toString(), "hello blob");
    const big = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const id = await client.putBlob([big.subarray(0, 1000), big.subarray(1000)], { scopeId: 3, partBytes: 512 * 1024 });
    assert.ok((await client.getBlob(id)).equals(big));
  } finally {
    client.close();
  }
});
