/**
 * Ledger ids: 128 bits, a scope in the high 64 and a ledger within the scope
 * in the low 64. Both halves can exceed 2^53, so they are bigints here; the
 * text form (the qualified name) is the 128-bit value as a lowercase UUID.
 */

const U64_MAX = (1n << 64n) - 1n;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEX32 = /^[0-9a-f]{32}$/i;
const SCOPED_DECIMAL = /^([0-9]+):([0-9]+)$/;

/** The wire form (uint64 fields as decimal strings, as the loader is set up). */
export interface LedgerIdMessage {
  scopeId: string;
  ledgerId: string;
}

export class LedgerId {
  readonly scopeId: bigint;
  readonly ledgerId: bigint;

  constructor(scopeId: bigint | number | string, ledgerId: bigint | number | string) {
    this.scopeId = toU64("scopeId", scopeId);
    this.ledgerId = toU64("ledgerId", ledgerId);
  }

  /** A qualified name, 32 hex digits, or `scope:ledger` in decimal. */
  static parse(text: string): LedgerId {
    const trimmed = text.trim();
    if (UUID.test(trimmed) || HEX32.test(trimmed)) {
      const hex = trimmed.replace(/-/g, "");
      return new LedgerId(BigInt(`0x${hex.slice(0, 16)}`), BigInt(`0x${hex.slice(16)}`));
    }
    const scoped = SCOPED_DECIMAL.exec(trimmed);
    if (scoped) return new LedgerId(BigInt(scoped[1]), BigInt(scoped[2]));
    throw new TypeError(
      `malformed ledger id ${JSON.stringify(text)}: expected a UUID-form qualified name ` +
        "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), 32 hex digits, or scope:ledger in decimal",
    );
  }

  /** A LedgerId, a qualified name or {scopeId, ledgerId}. */
  static from(value: LedgerIdLike): LedgerId {
    if (value instanceof LedgerId) return value;
    if (typeof value === "string") return LedgerId.parse(value);
    return new LedgerId(value.scopeId, value.ledgerId);
  }

  static fromMessage(message: LedgerIdMessage | null | undefined): LedgerId {
    if (!message) throw new TypeError("the answer carries no ledger id");
    return new LedgerId(message.scopeId || "0", message.ledgerId || "0");
  }

  /** The 128-bit value. */
  get value(): bigint {
    return (this.scopeId << 64n) | this.ledgerId;
  }

  /** The lowercase UUID form, e.g. 00000000-0000-0007-0000-00000000002a. */
  get qualifiedName(): string {
    const hex = this.value.toString(16).padStart(32, "0");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  toMessage(): LedgerIdMessage {
    return { scopeId: this.scopeId.toString(), ledgerId: this.ledgerId.toString() };
  }

  equals(other: LedgerIdLike): boolean {
    return LedgerId.from(other).value === this.value;
  }

  toString(): string {
    return this.qualifiedName;
  }

  toJSON(): string {
    return this.qualifiedName;
  }
}

export type LedgerIdLike = LedgerId | string | { scopeId: bigint | number | string; ledgerId: bigint | number | string };

export function toU64(name: string, value: bigint | number | string): bigint {
  let big: bigint;
  if (typeof value === "number" && !Number.isSafeInteger(value)) {
    throw new RangeError(`${name} ${value} is not an exact integer: pass a bigint or a decimal string`);
  }
  try {
    big = BigInt(value);
  } catch {
    throw new RangeError(`${name} ${JSON.stringify(value)} is not an integer`);
  }
  if (big < 0n || big > U64_MAX) throw new RangeError(`${name} ${big} is not an unsigned 64-bit integer`);
  return big;
}
