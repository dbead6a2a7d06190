/**
 * Conversions between the loaded protos' plain objects (64-bit fields as
 * decimal strings, enums as names) and the client's types.
 */
import { quireErrorFromDetails, type QuireError } from "./errors";
import { LedgerId, type LedgerIdMessage } from "./ids";
import { toDigestType, toLedgerState, type DigestType, type LedgerState } from "./enums";

// grpc-js messages are untyped here: the services are loaded at run time.
export type Wire = Record<string, any>;

export interface Ensemble {
  firstEntryId: number;
  bookieIds: string[];
}

export interface LedgerOwner {
  gateway: string;
  address: string;
  sessionId: string;
}

export interface LedgerMetadata {
  ledgerId: LedgerId;
  ensembleSize: number;
  writeQuorumSize: number;
  ackQuorumSize: number;
  state: LedgerState;
  /** The last entry of a closed ledger; -1 when empty or not closed. */
  lastEntryId: number;
  length: number;
  digestType: DigestType;
  ensembles: Ensemble[];
  customMetadata: Record<string, string>;
  createTime?: Date;
  createRequestId: string;
  owner?: LedgerOwner;
}

export interface Entry {
  entryId: number;
  payload: Buffer;
  /** The ledger's cumulative length up to and including this entry. */
  length: number;
}

export interface AppendAck {
  firstEntryId: number;
  lastEntryId: number;
  lastAddConfirmed: number;
  /** The gateway writing the ledger: on a session's first acknowledgement. */
  owner?: LedgerOwner;
}

export function safeNumber(name: string, value: string | number | undefined): number {
  const number = Number(value ?? 0);
  if (!Number.isSafeInteger(number)) throw new RangeError(`${name} ${value} exceeds 2^53`);
  return number;
}

export function entryIdArgument(name: string, value: number): string {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${name} ${value} must be an integer`);
  return String(value);
}

/** A payload as a Buffer (strings as UTF-8); anything else is a TypeError. */
export function toBuffer(value: Uint8Array | string): Buffer {
  if (typeof value === "string") return Buffer.from(value);
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`a payload must be a Buffer, a Uint8Array or a string, not ${typeof value}`);
}

function toOwner(wire: Wire | null | undefined): LedgerOwner | undefined {
  return wire ? { gateway: wire.gateway, address: wire.address, sessionId: String(wire.sessionId) } : undefined;
}

export function toMetadata(wire: Wire): LedgerMetadata {
  const seconds = wire.createTime ? Number(wire.createTime.seconds ?? 0) : undefined;
  return {
    ledgerId: LedgerId.fromMessage(wire.ledgerId as LedgerIdMessage),
    ensembleSize: wire.ensembleSize,
    writeQuorumSize: wire.writeQuorumSize,
    ackQuorumSize: wire.ackQuorumSize,
    state: toLedgerState(wire.state),
    lastEntryId: safeNumber("last_entry_id", wire.lastEntryId),
    length: safeNumber("length", wire.length),
    digestType: toDigestType(wire.digestType),
    ensembles: (wire.ensembles ?? []).map((e: Wire) => ({
      firstEntryId: safeNumber("first_entry_id", e.firstEntryId),
      bookieIds: [...e.bookieIds],
    })),
    customMetadata: { ...(wire.customMetadata ?? {}) },
    createTime:
      seconds === undefined ? undefined : new Date(seconds * 1000 + Math.floor((wire.createTime.nanos ?? 0) / 1e6)),
    createRequestId: wire.createRequestId ?? "",
    owner: toOwner(wire.owner),
  };
}

export function toEntry(wire: Wire): Entry {
  return {
    entryId: safeNumber("entry_id", wire.entryId),
    payload: wire.payload as Buffer,
    length: safeNumber("length", wire.length),
  };
}

/** One failed request of a ReadEntryStream (a ReadEntryError) as the error ReadEntry would have thrown. */
export function toReadError(wire: Wire): QuireError {
  const delay = wire.retryDelay as { seconds?: string | number; nanos?: number } | null | undefined;
  return quireErrorFromDetails(Number(wire.code), wire.message ?? "", {
    reason: wire.reason ?? "",
    domain: "quire",
    metadata: { ...(wire.metadata ?? {}) },
    retryDelayMs: delay ? Number(delay.seconds ?? 0) * 1000 + Math.round((delay.nanos ?? 0) / 1e6) : undefined,
  });
}

export function toAck(wire: Wire): AppendAck {
  return {
    firstEntryId: safeNumber("first_entry_id", wire.firstEntryId),
    lastEntryId: safeNumber("last_entry_id", wire.lastEntryId),
    lastAddConfirmed: safeNumber("last_add_confirmed", wire.lastAddConfirmed),
    owner: toOwner(wire.owner),
  };
}
