// Every kind of call stops on its AbortSignal (an AbortError) and at its
// deadline (a DeadlineExceededError), against an in-process gateway whose
// GetLedgerMetadata and TailEntries never answer and whose write sessions
// acknowledge nothing: without the signal or deadline these calls would wait
// for ever (the test's own timeout would fail them).
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AbortError,
  CancelledError,
  DeadlineExceededError,
  LedgerId,
  QuireClient,
  QuireError,
  type Entry,
} from "../src";
import { FakeGateway } from "./support/fakeGateway";

const ledger = new LedgerId(0n, 1n);
const limit = { timeout: 30_000 };
let fake: FakeGateway;
let client: QuireClient;

before(async () => {
  fake = await new FakeGateway().start();
  client = new QuireClient(fake.target);
});
after(() => {
  client.close();
  fake.stop();
});

function isAbortError(error: unknown): boolean {
  assert.ok(error instanceof AbortError, `not an AbortError: ${error}`);
  assert.ok(error instanceof CancelledError && error instanceof QuireError);
  assert.equal(error.name, "AbortError");
  assert.equal(error.codeName, "CANCELLED");
  return true;
}

function isDeadlineExceeded(error: unknown): boolean {
  assert.ok(error instanceof DeadlineExceededError, `not a DeadlineExceededError: ${error}`);
  assert.equal(error.codeName, "DEADLINE_EXCEEDED");
  return true;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200 && !condition(); i++) await sleep(50);
  assert.ok(condition(), `gave up waiting for ${what}`);
}

async function drain(iterable: AsyncIterable<Entry>): Promise<void> {
  for await (const entry of iterable) void entry;
}

test("a call with one answer: aborted, aborted before it starts, past its deadline, past the client's", limit, async () => {
  const controller = new AbortController();
  const pending = client.ledgerMetadata(ledger, { signal: controller.signal });
  setImmediate(() => controller.abort(new Error("the user left")));
  await assert.rejects(pending, (error) => isAbortError(error) && (error as Error).cause instanceof Error);

  await assert.rejects(client.ledgerMetadata(ledger, { signal: AbortSignal.abort() }), isAbortError);
  await assert.rejects(client.ledgerMetadata(ledger, { timeoutMs: 200 }), isDeadlineExceeded);
  await assert.rejects(client.ledgerMetadata(ledger, { deadline: new Date(Date.now() + 200) }), isDeadlineExceeded);
  const impatient = new QuireClient(fake.target, { timeoutMs: 200 });
  try {
    await assert.rejects(impatient.ledgerMetadata(ledger), isDeadlineExceeded);
  } finally {
    impatient.close();
  }
  await assert.rejects(client.ledgerMetadata(ledger, { timeoutMs: -1 }), RangeError);
});

test("a stream: a tail aborted, and a tail past its deadline", limit, async () => {
  const controller = new AbortController();
  const tailing = drain(client.tail(ledger, { signal: controller.signal }));
  setImmediate(() => controller.abort());
  await assert.rejects(tailing, isAbortError);
  await assert.rejects(drain(client.tail(ledger, { timeoutMs: 300 })), isDeadlineExceeded);
});

test("a write session: aborted, and past its deadline, with its entries unacknowledged", limit, async () => {
  fake.withholdAcks = true;
  try {
    const controller = new AbortController();
    const aborted = client.writer(ledger, { signal: controller.signal });
    const writing = pipeline(Readable.from(["a", "b", "c"]), aborted);
    await until(() => fake.stored.length === 3, "the entries to reach the gateway");
    controller.abort();
    await assert.rejects(writing, isAbortError);
    assert.equal(aborted.lastEntryId, -1);
    assert.ok(aborted.unacknowledged > 0);

    const late = client.writer(ledger, { timeoutMs: 300 });
    await assert.rejects(pipeline(Readable.from(["d"]), late), isDeadlineExceeded);
    await assert.rejects(late.append("after"), isDeadlineExceeded);
  } finally {
    fake.release();
  }
});
