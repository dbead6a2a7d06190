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

test("clients use the published ports, and every address the services advertise answers", { skip, timeout: 300_000 }, async () => {
  const overrideBefore = process.env.TESTCONTAINERS_HOST_OVERRIDE;
  const container = await new QuireContainer(image, { bookies: 2 }).start();
  try {
    // No process-wide setting changes under the caller's feet.
    assert.equal(process.env.TESTCONTAINERS_HOST_OVERRIDE, overrideBefore);
    const { getContainerRuntimeClient } = await import("testcontainers");
    const runtime = await getContainerRuntimeClient();
    const info = await runtime.container.inspect(runtime.container.getById(container.getId()));
    assert.notEqual(info.HostConfig.NetworkMode, "host");
    const published = Object.values(info.NetworkSettings.Ports ?? {}).flatMap((bindings) =>
      (bindings ?? []).map((binding) => Number(binding.HostPort)),
    );
    for (const target of [container.getGatewayTarget(), container.getRegistryTarget(), container.getEtcdEndpoint()]) {
      const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
      assert.equal(host, runtime.info.containerRuntime.host);
      assert.ok(published.includes(port), `${target} is not on a published port (${published.join(", ")})`);
    }

    const client = new QuireClient(container.getGatewayTarget());
    let ledgerId;
    let owner: string | undefined;
    const payloads = Array.from({ length: 10 }, (_, i) => `entry ${i}`);
    try {
      const metadata = await client.createLedger({ ensembleSize: 2, writeQuorumSize: 2, ackQuorumSize: 2 });
      ledgerId = metadata.ledgerId;
      owner = metadata.owner?.address;
      await client.appendAll(ledgerId, payloads);
    } finally {
      client.close();
    }
    // The owner's address, where a write session may be sent, answers from here.
    assert.ok(owner, "the ledger names no owner");
    const atOwner = new QuireClient(owner);
    try {
      const read: string[] = [];
      for await (const entry of atOwner.read(ledgerId)) read.push(entry.payload.toString());
      assert.deepEqual(read, payloads);
    } finally {
      atOwner.close();
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
