// Back-pressure of a write session against an in-process server that does
// not read until told to: append() stops resolving once the entries in flight
// reach the writer's bound, and every entry is acknowledged once the server
// reads again.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { LedgerId, QuireClient } from "../src";
import { loadGatewayServices } from "../src/protos";

type Wire = Record<string, any>;

let server: Server;
let target: string;
// The server's write session, held unread until release(). A release that
// comes before the session reaches the server must not be lost: the session
// would then stay paused and the test would wait for ever.
let held: ServerDuplexStream<Wire, Wire> | undefined;
let released = false;

function release(): void {
  released = true;
  held?.resume();
}

before(async () => {
  const { LedgerService } = loadGatewayServices();
  server = new Server();
  server.addService(LedgerService.service, {
    AppendEntries: (call: ServerDuplexStream<Wire, Wire>) => {
      let next = 0;
      held = call;
      if (!released) call.pause();
      call.on("data", (request: Wire) => {
        const count = (request.payloads as Buffer[]).length;
        if (count === 0) return;
        call.write({ firstEntryId: String(next), lastEntryId: String(next + count - 1), lastAddConfirmed: String(next + count - 1) });
        next += count;
      });
      call.on("end", () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  target = `127.0.0.1:${port}`;
});

after(() => server.forceShutdown());

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200 && !condition(); i++) await sleep(50);
  assert.ok(condition(), `gave up waiting for ${what}`);
}

test("a write session waits while the server does not read", async () => {
  const client = new QuireClient(target);
  try {
    const writer = client.writer(new LedgerId(0n, 1n), { expectedEntryId: 0 }); // this server has no AddEntry to ask
    const total = 400;
    const payload = Buffer.alloc(256 * 1024, 7); // 100 MiB in all: far more than the stream buffers
    let written = 0;
    const producing = (async () => {
      for (let i = 0; i < total; i++) {
        await writer.append(payload);
        written += 1;
      }
    })();
    await until(() => held !== undefined && writer.backPressureWaits > 0, "the session to reach the server and append() to wait");
    const whileBlocked = written;
    assert.ok(whileBlocked < total, `all ${total} writes went through a server that reads nothing`);
    release();
    await producing;
    assert.equal(await writer.close(), total - 1);
    assert.equal(written, total);
  } finally {
    client.close();
  }
});
