// The testcontainers helper: runs when QUIRE_CONTAINER_IMAGE names a built
// image and a Docker engine answers (tests/container/test_node_container.py decides).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { QuireClient } from "../src";
import { QuireContainer, QuireContainerError } from "../src/container";

const image = process.env.QUIRE_CONTAINER_IMAGE;
const skip = image ? false : "QUIRE_CONTAINER_IMAGE is not set (no Docker engine or image)";

test("writes and reads through the container's gateway", { skip, timeout: 300_000 }, async () => {
  const container = await new QuireContainer(image, { bookies: 3 }).start();
  try {
    const client = new QuireClient(container.getGatewayTarget());
    try {
      const { ledgerId } = await client.createLedger();
      const payloads = Array.from({ length: 50 }, (_, i) => `entry ${i}`);
      await client.appendAll(ledgerId, payloads);
      const read: string[] = [];
      for await (const entry of client.read(ledgerId)) read.push(entry.payload.toString());
      assert.deepEqual(read, payloads);
      await client.closeLedger(ledgerId);
    } finally {
      client.close();
    }
  } finally {
    await container.stop();
  }
});

test("a container that cannot start fails with its logs", { skip, timeout: 300_000 }, async () => {
  const broken = new QuireContainer(image, { startupTimeoutMs: 60_000, env: { QUIRE_BOOKIE_MAX_ENTRY_BYTES: "1" } });
  await assert.rejects(broken.start(), (e) => {
    assert.ok(e instanceof QuireContainerError);
    assert.match(e.message, /the container exited with status 1/);
    assert.match(e.message, /QUIRE_BOOKIE_MAX_ENTRY_BYTES=1 is below the minimum 1024/);
    return true;
  });
});
