/**
 * The protos' enums as string literal unions. The protos are loaded with
 * `enums: String`, so a field holds its value's name; these lists name every
 * value this release knows (test/enums.test.ts checks them against the
 * protos), and TypeScript then catches a misspelt comparison.
 */

export const LEDGER_STATES = [
  "LEDGER_STATE_UNSPECIFIED",
  "LEDGER_STATE_OPEN",
  "LEDGER_STATE_IN_RECOVERY",
  "LEDGER_STATE_CLOSED",
] as const;
/** quire.common.v1.LedgerState. */
export type LedgerState = (typeof LEDGER_STATES)[number];

export const DIGEST_TYPES = [
  "DIGEST_TYPE_UNSPECIFIED",
  "DIGEST_TYPE_CRC32",
  "DIGEST_TYPE_HMAC",
  "DIGEST_TYPE_CRC32C",
  "DIGEST_TYPE_DUMMY",
] as const;
/** quire.common.v1.DigestType. */
export type DigestType = (typeof DIGEST_TYPES)[number];

export const ERROR_REASONS = [
  "ERROR_REASON_UNSPECIFIED",
  "ERROR_REASON_INVALID_ARGUMENT",
  "ERROR_REASON_INVALID_LEDGER_ID",
  "ERROR_REASON_INVALID_QUORUM",
  "ERROR_REASON_INVALID_BOOKIE_ID",
  "ERROR_REASON_ENTRY_HEADER_MISMATCH",
  "ERROR_REASON_LEDGER_NOT_FOUND",
  "ERROR_REASON_ENTRY_NOT_FOUND",
  "ERROR_REASON_BOOKIE_NOT_FOUND",
  "ERROR_REASON_READ_BEYOND_LAC",
  "ERROR_REASON_LEDGER_FENCED",
  "ERROR_REASON_LEDGER_CLOSED",
  "ERROR_REASON_BOOKIE_READ_ONLY",
  "ERROR_REASON_LEDGER_NOT_WRITABLE_HERE",
  "ERROR_REASON_LEDGER_OWNER_GONE",
  "ERROR_REASON_UNEXPECTED_ENTRY_ID",
  "ERROR_REASON_METADATA_VERSION_CONFLICT",
  "ERROR_REASON_LEDGER_EXISTS",
  "ERROR_REASON_BOOKIE_ALREADY_REGISTERED",
  "ERROR_REASON_COOKIE_EXISTS",
  "ERROR_REASON_REQUEST_ID_REUSED",
  "ERROR_REASON_WRONG_PASSWORD",
  "ERROR_REASON_NOT_ENOUGH_BOOKIES",
  "ERROR_REASON_BOOKIE_UNAVAILABLE",
  "ERROR_REASON_METADATA_STORE_UNAVAILABLE",
  "ERROR_REASON_SERVICE_UNAVAILABLE",
  "ERROR_REASON_DISK_FULL",
  "ERROR_REASON_OVERLOADED",
  "ERROR_REASON_ENTRY_TOO_LARGE",
  "ERROR_REASON_DIGEST_MISMATCH",
  "ERROR_REASON_STORAGE_ERROR",
  "ERROR_REASON_NOT_IMPLEMENTED",
  "ERROR_REASON_UNAUTHENTICATED",
  "ERROR_REASON_PERMISSION_DENIED_ROLE",
  "ERROR_REASON_SERVICE_IDENTITY_REQUIRED",
  "ERROR_REASON_CLIENT_IDENTITY_REQUIRED",
] as const;
/**
 * quire.common.v1.ErrorReason (docs/errors.md). A reason newer than this
 * release is still passed on as the service sent it.
 */
export type ErrorReason = (typeof ERROR_REASONS)[number];

function member<T extends string>(known: readonly T[], value: unknown, fallback: T): T {
  return known.includes(value as T) ? (value as T) : fallback;
}

/** A decoded LedgerState; a value newer than this release (the loader gives its number) reads as UNSPECIFIED. */
export function toLedgerState(value: unknown): LedgerState {
  return member(LEDGER_STATES, value, "LEDGER_STATE_UNSPECIFIED");
}

/** A decoded DigestType, by toLedgerState's rule. */
export function toDigestType(value: unknown): DigestType {
  return member(DIGEST_TYPES, value, "DIGEST_TYPE_UNSPECIFIED");
}
