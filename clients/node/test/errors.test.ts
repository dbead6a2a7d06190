import { test } from "node:test";
import * as assert from "node:assert/strict";
import { Metadata, status } from "@grpc/grpc-js";
import {
  decodeDetails,
  encodeDetails,
  FailedPreconditionError,
  NotFoundError,
  QuireError,
  quireError,
  UnavailableError,
} from "../src";

function trailers(value: Buffer): Metadata {
  const metadata = new Metadata();
  metadata.set("grpc-status-details-bin", value);
  return metadata;
}

test("ErrorInfo gives the reason and metadata; the code gives the class", () => {
  const details = encodeDetails(status.FAILED_PRECONDITION, "no", {
    reason: "ERROR_REASON_UNEXPECTED_ENTRY_ID",
    metadata: { next_entry_id: "5" },
  });
  const error = quireError(status.FAILED_PRECONDITION, "no", trailers(details));
  assert.ok(error instanceof FailedPreconditionError && error instanceof QuireError);
  assert.equal(error.reason, "ERROR_REASON_UNEXPECTED_ENTRY_ID");
  assert.equal(error.metadata.next_entry_id, "5");
  assert.equal(error.retryable, false);
  assert.equal(error.retryDelayMs, undefined);
});

test("RetryInfo beside ErrorInfo gives the delay and makes the error retryable", () => {
  const details = encodeDetails(status.RESOURCE_EXHAUSTED, "busy", {
    reason: "ERROR_REASON_OVERLOADED",
    retryDelayMs: 1500,
  });
  const error = quireError(status.RESOURCE_EXHAUSTED, "busy", trailers(details));
  assert.equal(error.reason, "ERROR_REASON_OVERLOADED");
  assert.equal(error.retryDelayMs, 1500);
  assert.equal(error.retryable, true);
});

test("a missing or undecodable trailer still gives a typed error", () => {
  const bare = quireError(status.UNAVAILABLE, "gone", new Metadata());
  assert.ok(bare instanceof UnavailableError);
  assert.equal(bare.reason, "");
  assert.equal(bare.retryable, true);
  const garbage = quireError(status.NOT_FOUND, "x", trailers(Buffer.from([0xff, 0xff, 0xff])));
  assert.ok(garbage instanceof NotFoundError);
  assert.equal(garbage.reason, "");
  assert.deepEqual(decodeDetails(new Metadata()), {});
});
