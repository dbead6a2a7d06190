// The literal unions of src/enums.ts name exactly the values of the protos' enums.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import * as protobuf from "protobufjs";
import { DIGEST_TYPES, ERROR_REASONS, LEDGER_STATES, toDigestType, toLedgerState } from "../src";
import { defaultProtosDir } from "../src/protos";

const root = protobuf.loadSync(path.join(defaultProtosDir(), "quire/common/v1/common.proto"));

function names(enumName: string): string[] {
  const values = root.lookupEnum(enumName).values;
  return Object.keys(values).sort((a, b) => values[a] - values[b]);
}

test("each union lists its enum's values, in the protos' order", () => {
  assert.deepEqual([...LEDGER_STATES], names("quire.common.v1.LedgerState"));
  assert.deepEqual([...DIGEST_TYPES], names("quire.common.v1.DigestType"));
  assert.deepEqual([...ERROR_REASONS], names("quire.common.v1.ErrorReason"));
});

test("a value newer than this release reads as UNSPECIFIED", () => {
  assert.equal(toLedgerState("LEDGER_STATE_CLOSED"), "LEDGER_STATE_CLOSED");
  assert.equal(toLedgerState(9), "LEDGER_STATE_UNSPECIFIED");
  assert.equal(toDigestType("DIGEST_TYPE_HMAC"), "DIGEST_TYPE_HMAC");
  assert.equal(toDigestType("DIGEST_TYPE_SHA3"), "DIGEST_TYPE_UNSPECIFIED");
});
