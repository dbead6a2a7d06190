// Against a TLS cluster: QUIRE_TLS_GATEWAY, QUIRE_TLS_CA, QUIRE_TLS_CERT and
// QUIRE_TLS_KEY (a client certificate whose roles only read) and
// QUIRE_TLS_TOKEN (a bearer token that may write scope 7).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { PermissionDeniedError, QuireClient, UnauthenticatedError } from "../src";

const env = process.env;
const skip = env.QUIRE_TLS_GATEWAY ? false : "QUIRE_TLS_GATEWAY is not set (no TLS cluster to test against)";

function connect(token?: string): QuireClient {
  return new QuireClient(env.QUIRE_TLS_GATEWAY as string, {
    tls: { ca: env.QUIRE_TLS_CA as string, cert: env.QUIRE_TLS_CERT, key: env.QUIRE_TLS_KEY },
    token,
  });
}

test("the token's roles write; the certificate's alone only read", { skip }, async () => {
  const writer = connect(env.QUIRE_TLS_TOKEN);
  const reader = connect();
  try {
    const { ledgerId } = await writer.createLedger({ scopeId: 7 });
    assert.equal(await writer.appendAll(ledgerId, ["over", "mutual", "tls"]), 2);
    const read: string[] = [];
    for await (const entry of reader.read(ledgerId)) read.push(entry.payload.toString());
    assert.deepEqual(read, ["over", "mutual", "tls"]);
    await assert.rejects(reader.addEntry(ledgerId, "no"), (e) => {
      assert.ok(e instanceof PermissionDeniedError);
      assert.equal(e.reason, "ERROR_REASON_PERMISSION_DENIED_ROLE");
      assert.match(e.message, /'write'/);
      return true;
    });
    const blob = await writer.putBlob("secret blob", { scopeId: 7 });
    assert.equal((await reader.getBlob(blob)).toString(), "secret blob");
  } finally {
    writer.close();
    reader.close();
  }
});

test("a forged token is UNAUTHENTICATED", { skip }, async () => {
  const forged = connect("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl");
  try {
    await assert.rejects(forged.createLedger({ scopeId: 7 }), (e) => e instanceof UnauthenticatedError && e.reason === "ERROR_REASON_UNAUTHENTICATED");
  } finally {
    forged.close();
  }
});

test("a token without TLS is refused before any call", () => {
  assert.throws(() => new QuireClient("127.0.0.1:1", { token: "t" }), /a bearer token needs TLS/);
});
