// Resumption logic against an in-process server that drops its streams:
// reads and tails continue from the next entry, exactly once each.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { Server, ServerCredentials, status, type ServerWritableStream } from "@grpc/grpc-js";
import { LedgerId, QuireClient, UnavailableError, NotFoundError } from "../src";
import { loadGatewayServices } from "../src/protos";

const LAST = 9; // entries 0..9
let server: Server;
let target: string;
const requests: Array<{ method: string; first: number }> = [];
let failEvery = 3; // each stream delivers this many entries, then fails UNAVAILABLE

type Call = ServerWritableStream<Record<string, any>, unknown>;

function serve(method: string) {
  return (call: Call) => {
    const first = Number(call.request.firstEntryId);
    requests.push({ method, first });
    if (call.request.ledgerId.ledgerId === "404") {
      call.emit("error", { code: status.NOT_FOUND, details: "no such ledger" });
      return;
    }
    let sent = 0;
    for (let id = first; id <= LAST; id++) {
      if (sent === failEvery) {
        call.emit("error", { code: status.UNAVAILABLE, details: "dropped" });
        return;
      }
      call.write({ entries: [{ entryId: String(id), payload: Buffer.from(`e${id}`), length: String(id + 1) }] });
      sent++;
    }
    call.end();
  };
}

before(async () => {
  const { LedgerService } = loadGatewayServices();
  server = new Server();
  server.addService(LedgerService.service, {
    ReadEntries: serve("ReadEntries"),
    TailEntries: serve("TailEntries"),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  target = `127.0.0.1:${port}`;
});

after(() => server.forceShutdown());

async function collect(iterable: AsyncIterable<{ entryId: number; payload: Buffer }>): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of iterable) out.push(entry.payload.toString());
  return out;
}

const ledger = new LedgerId(1n, 2n);
const all = Array.from({ length: LAST + 1 }, (_, i) => `e${i}`);

test("a read that loses its stream resumes from the next entry", async () => {
  requests.length = 0;
  failEvery = 3;
  const client = new QuireClient(target, { resumeBackoffMs: [1, 5] });
  try {
    assert.deepEqual(await collect(client.read(ledger, { first: 0, last: LAST })), all);
    assert.deepEqual(requests.map((r) => r.first), [0, 3, 6, 9]);
  } finally {
    client.close();
  }
});

test("a tail resumes too, and a resumed read stops at its last entry", async () => {
  requests.length = 0;
  failEvery = 5;
  const client = new QuireClient(target, { resumeBackoffMs: [1, 5] });
  try {
    assert.deepEqual(await collect(client.tail(ledger, { first: 2 })), all.slice(2));
    assert.deepEqual(requests.map((r) => [r.method, r.first]), [["TailEntries", 2], ["TailEntries", 7]]);
    requests.length = 0;
    assert.deepEqual(await collect(client.read(ledger, { first: 0, last: 4 })), all.slice(0, 5));
  } finally {
    client.close();
  }
});

test("resumption is bounded: a stream that never progresses fails UNAVAILABLE", async () => {
  requests.length = 0;
  failEvery = 0;
  const client = new QuireClient(target, { resumeAttempts: 2, resumeBackoffMs: [1, 5] });
  try {
    await assert.rejects(collect(client.read(ledger)), (error) => error instanceof UnavailableError);
    assert.equal(requests.length, 3); // the first try and two resumptions
  } finally {
    client.close();
  }
});

test("other errors are not retried", async () => {
  requests.length = 0;
  const client = new QuireClient(target, { resumeBackoffMs: [1, 5] });
  try {
    await assert.rejects(collect(client.read({ scopeId: 0, ledgerId: 404 })), (error) => error instanceof NotFoundError);
    assert.equal(requests.length, 1);
  } finally {
    client.close();
  }
});
