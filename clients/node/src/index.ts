export { LedgerId, type LedgerIdLike, type LedgerIdMessage } from "./ids";
export * from "./errors";
export {
  QuireClient,
  LedgerWriter,
  channelCredentials,
  type AppendAck,
  type ClientTls,
  type CreateLedgerOptions,
  type Ensemble,
  type Entry,
  type LedgerMetadata,
  type LedgerOwner,
  type Payloads,
  type QuireClientOptions,
} from "./client";
// QuireContainer lives in "@quire/client/container" (it needs the optional testcontainers package).
