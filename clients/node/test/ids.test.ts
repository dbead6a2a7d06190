import { test } from "node:test";
import * as assert from "node:assert/strict";
import { LedgerId } from "../src";

test("ids past 2^53 keep every bit in both forms", () => {
  const id = new LedgerId(0xfedcba9876543210n, (1n << 64n) - 1n);
  assert.equal(id.qualifiedName, "fedcba98-7654-3210-ffff-ffffffffffff");
  const parsed = LedgerId.parse(id.qualifiedName);
  assert.equal(parsed.scopeId, 0xfedcba9876543210n);
  assert.equal(parsed.ledgerId, (1n << 64n) - 1n);
  assert.deepEqual(id.toMessage(), { scopeId: "18364758544493064720", ledgerId: "18446744073709551615" });
  assert.ok(LedgerId.fromMessage(id.toMessage()).equals(id));
});

test("the three text forms parse to one id", () => {
  const id = new LedgerId(7n, 42n);
  assert.equal(id.toString(), "00000000-0000-0007-0000-00000000002a");
  assert.ok(LedgerId.parse("0000000000000007000000000000002A").equals(id));
  assert.ok(LedgerId.parse("7:42").equals(id));
  assert.ok(LedgerId.from({ scopeId: 7, ledgerId: "42" }).equals(id));
});

test("bad ids are refused with the reason", () => {
  assert.throws(() => LedgerId.parse("nope"), /malformed ledger id "nope"/);
  assert.throws(() => new LedgerId(-1n, 0n), /scopeId -1 is not an unsigned 64-bit integer/);
  assert.throws(() => new LedgerId(1n << 64n, 0n), /not an unsigned 64-bit integer/);
  assert.throws(() => new LedgerId(2 ** 60, 0), /not an exact integer/);
});
