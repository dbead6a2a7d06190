export { LedgerId, type LedgerIdLike, type LedgerIdMessage } from "./ids";
export * from "./errors";
export * from "./enums";
export { type CallOptions } from "./call";
export {
  QuireClient,
  channelCredentials,
  type ClientTls,
  type CreateLedgerOptions,
  type Payloads,
  type QuireClientOptions,
  type ReadOptions,
} from "./client";
export { LedgerWriter, type WriterOptions } from "./writer";
export { type AppendAck, type Ensemble, type Entry, type LedgerMetadata, type LedgerOwner } from "./wire";
// QuireContainer lives in "@quire-ledger/client/container" (it needs the optional testcontainers package).
