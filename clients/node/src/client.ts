/**
 * QuireClient: the gateway's LedgerService and BlobService over @grpc/grpc-js.
 */
import * as fs from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import {
  credentials as grpcCredentials,
  Metadata,
  type CallOptions,
  type ChannelCredentials,
  type Client,
  type ClientDuplexStream,
  type ClientReadableStream,
  type ClientWritableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import {
  FailedPreconditionError,
  QuireError,
  quireErrorFromDetails,
  translate,
  UnavailableError,
} from "./errors";
import { LedgerId, toU64, type LedgerIdLike, type LedgerIdMessage } from "./ids";
import { loadGatewayServices } from "./protos";

const UNEXPECTED_ENTRY_ID = "ERROR_REASON_UNEXPECTED_ENTRY_ID";
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** TLS material: PEM contents or paths of PEM files. */
export interface ClientTls {
  /** The CA that signed the services' certificates. */
  ca: string | Buffer;
  /** For mutual TLS: the client's certificate and key. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Check the server's certificate against this name instead of the dialed host. */
  serverName?: string;
}

export interface QuireClientOptions {
  /** Deadline of unary calls, in milliseconds (default 30000). */
  timeoutMs?: number;
  tls?: ClientTls;
  /** A bearer token sent as `authorization: Bearer <token>` on every call (needs TLS). */
  token?: string;
  /** More gateways of the same cluster: a read or tail that loses its gateway resumes at the next one. */
  gateways?: string[];
  /** Attempts of one resumption of a read or tail after UNAVAILABLE (default 5). */
  resumeAttempts?: number;
  /** First and longest pause between those attempts, in milliseconds (default [100, 2000]). */
  resumeBackoffMs?: [number, number];
  /** Where the protos are (default: the package's protos/, or QUIRE_PROTOS_DIR). */
  protosDir?: string;
}

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
  /** LEDGER_STATE_OPEN, LEDGER_STATE_IN_RECOVERY or LEDGER_STATE_CLOSED. */
  state: string;
  /** The last entry of a closed ledger; -1 when empty or not closed. */
  lastEntryId: number;
  length: number;
  digestType: string;
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
}

export interface CreateLedgerOptions {
  /** A new id within this scope. */
  scopeId?: bigint | number | string;
  /** Exactly this id (ALREADY_EXISTS when taken). */
  ledgerId?: LedgerIdLike;
  /** A scope-0 id from the legacy 64-bit generator. */
  legacy?: boolean;
  ensembleSize?: number;
  writeQuorumSize?: number;
  ackQuorumSize?: number;
  /** DIGEST_TYPE_CRC32C (default), DIGEST_TYPE_CRC32, DIGEST_TYPE_HMAC or DIGEST_TYPE_DUMMY. */
  digestType?: string;
  password?: Buffer | string;
  customMetadata?: Record<string, string>;
  /** Idempotency key: a retried create with the same one returns the same ledger. */
  requestId?: string;
}

export type Payloads = Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>;

// grpc-js clients are untyped here: the services are loaded at run time.
type AnyClient = Client & Record<string, (...args: unknown[]) => unknown>;
type Wire = Record<string, any>;

function readPem(value: string | Buffer | undefined): Buffer | null {
  if (value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  return value.includes("-----BEGIN") ? Buffer.from(value) : fs.readFileSync(value);
}

/** Channel credentials: plaintext without `tls` (development clusters), else TLS plus the token. */
export function channelCredentials(tls?: ClientTls, token?: string): ChannelCredentials {
  if (!tls) {
    if (token) throw new TypeError("a bearer token needs TLS (gRPC sends call credentials only over TLS)");
    return grpcCredentials.createInsecure();
  }
  let creds = grpcCredentials.createSsl(readPem(tls.ca), readPem(tls.key), readPem(tls.cert));
  if (token) {
    const bearer = grpcCredentials.createFromMetadataGenerator((_params, callback) => {
      const metadata = new Metadata();
      metadata.set("authorization", `Bearer ${token}`);
      callback(null, metadata);
    });
    creds = grpcCredentials.combineChannelCredentials(creds, bearer);
  }
  return creds;
}

function safeNumber(name: string, value: string | number | undefined): number {
  const number = Number(value ?? 0);
  if (!Number.isSafeInteger(number)) throw new RangeError(`${name} ${value} exceeds 2^53`);
  return number;
}

function entryIdArgument(name: string, value: number): string {
  if (!Number.isSafeInteger(value)) throw new RangeError(`${name} ${value} must be an integer`);
  return String(value);
}

function toBuffer(value: Uint8Array | string): Buffer {
  return typeof value === "string" ? Buffer.from(value) : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

function toMetadata(wire: Wire): LedgerMetadata {
  const seconds = wire.createTime ? Number(wire.createTime.seconds ?? 0) : undefined;
  return {
    ledgerId: LedgerId.fromMessage(wire.ledgerId as LedgerIdMessage),
    ensembleSize: wire.ensembleSize,
    writeQuorumSize: wire.writeQuorumSize,
    ackQuorumSize: wire.ackQuorumSize,
    state: wire.state,
    lastEntryId: safeNumber("last_entry_id", wire.lastEntryId),
    length: safeNumber("length", wire.length),
    digestType: wire.digestType,
    ensembles: (wire.ensembles ?? []).map((e: Wire) => ({
      firstEntryId: safeNumber("first_entry_id", e.firstEntryId),
      bookieIds: [...e.bookieIds],
    })),
    customMetadata: { ...(wire.customMetadata ?? {}) },
    createTime:
      seconds === undefined ? undefined : new Date(seconds * 1000 + Math.floor((wire.createTime.nanos ?? 0) / 1e6)),
    createRequestId: wire.createRequestId ?? "",
    owner: wire.owner
      ? { gateway: wire.owner.gateway, address: wire.owner.address, sessionId: String(wire.owner.sessionId) }
      : undefined,
  };
}

function toEntry(wire: Wire): Entry {
  return {
    entryId: safeNumber("entry_id", wire.entryId),
    payload: wire.payload as Buffer,
    length: safeNumber("length", wire.length),
  };
}

/** One failed request of a ReadEntryStream (a ReadEntryError) as the error ReadEntry would have thrown. */
function toReadError(wire: Wire): QuireError {
  const delay = wire.retryDelay as { seconds?: string | number; nanos?: number } | null | undefined;
  return quireErrorFromDetails(Number(wire.code), wire.message ?? "", {
    reason: wire.reason ?? "",
    domain: "quire",
    metadata: { ...(wire.metadata ?? {}) },
    retryDelayMs: delay ? Number(delay.seconds ?? 0) * 1000 + Math.round((delay.nanos ?? 0) / 1e6) : undefined,
  });
}

function toAck(wire: Wire): AppendAck {
  return {
    firstEntryId: safeNumber("first_entry_id", wire.firstEntryId),
    lastEntryId: safeNumber("last_entry_id", wire.lastEntryId),
    lastAddConfirmed: safeNumber("last_add_confirmed", wire.lastAddConfirmed),
  };
}

/** Resolves once the stream asks for more (drain) or can take no more (it ended or failed). */
function writable(stream: NodeJS.EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      for (const event of ["drain", "error", "close", "finish", "status"]) stream.off(event, done);
      resolve();
    };
    for (const event of ["drain", "error", "close", "finish", "status"]) stream.on(event, done);
  });
}

export class QuireClient {
  readonly timeoutMs: number;
  readonly resumeAttempts: number;
  private readonly resumeBackoffMs: [number, number];
  private readonly targets: string[];
  private readonly credentials: ChannelCredentials;
  private readonly channelOptions: Record<string, string | number>;
  private readonly services: ReturnType<typeof loadGatewayServices>;
  private current = 0;
  private ledgers!: AnyClient;
  private blobs!: AnyClient;

  constructor(gateway = "127.0.0.1:7000", options: QuireClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.resumeAttempts = options.resumeAttempts ?? 5;
    this.resumeBackoffMs = options.resumeBackoffMs ?? [100, 2000];
    this.targets = [gateway, ...(options.gateways ?? [])];
    this.credentials = channelCredentials(options.tls, options.token);
    this.channelOptions = {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    };
    if (options.tls?.serverName) this.channelOptions["grpc.ssl_target_name_override"] = options.tls.serverName;
    this.services = loadGatewayServices(options.protosDir);
    this.connect(0);
  }

  /** The gateway calls go to now. */
  get gateway(): string {
    return this.targets[this.current];
  }

  private connect(index: number): void {
    this.ledgers?.close();
    this.blobs?.close();
    this.current = index;
    const target = this.targets[index];
    this.ledgers = new this.services.LedgerService(target, this.credentials, this.channelOptions) as AnyClient;
    this.blobs = new this.services.BlobService(target, this.credentials, this.channelOptions) as AnyClient;
  }

  /** After losing gateway `failed`: the next one given, unless another stream has moved on already. */
  private failOver(failed: number): void {
    if (this.targets.length > 1 && this.current === failed) this.connect((failed + 1) % this.targets.length);
  }

  close(): void {
    this.ledgers.close();
    this.blobs.close();
  }

  private deadline(): CallOptions {
    return { deadline: Date.now() + this.timeoutMs };
  }

  private unary(client: AnyClient, method: string, request: Wire): Promise<Wire> {
    return new Promise((resolve, reject) => {
      client[method](request, new Metadata(), this.deadline(), (error: ServiceError | null, response: Wire) => {
        if (error) reject(translate(error));
        else resolve(response);
      });
    });
  }

  async createLedger(options: CreateLedgerOptions = {}): Promise<LedgerMetadata> {
    const request: Wire = {
      ensembleSize: options.ensembleSize ?? 3,
      writeQuorumSize: options.writeQuorumSize ?? 2,
      ackQuorumSize: options.ackQuorumSize ?? 2,
      digestType: options.digestType ?? "DIGEST_TYPE_UNSPECIFIED",
      password: options.password === undefined ? Buffer.alloc(0) : Buffer.from(options.password),
      customMetadata: options.customMetadata ?? {},
      requestId: options.requestId ?? "",
    };
    if (options.ledgerId !== undefined) request.ledgerId = LedgerId.from(options.ledgerId).toMessage();
    else if (options.scopeId !== undefined) request.scopeId = toU64("scopeId", options.scopeId).toString();
    else if (options.legacy) request.legacy = true;
    const response = await this.unary(this.ledgers, "CreateLedger", request);
    return toMetadata(response.metadata);
  }

  /** Opens a ledger for reading; with `recovery` fences it and closes it at its agreed end. */
  async openLedger(
    ledger: LedgerIdLike,
    options: { password?: Buffer | string; recovery?: boolean } = {},
  ): Promise<{ metadata: LedgerMetadata; lastAddConfirmed: number }> {
    const response = await this.unary(this.ledgers, "OpenLedger", {
      ledgerId: LedgerId.from(ledger).toMessage(),
      password: Buffer.from(options.password ?? ""),
      recovery: options.recovery ?? false,
    });
    return {
      metadata: toMetadata(response.metadata),
      lastAddConfirmed: safeNumber("last_add_confirmed", response.lastAddConfirmed),
    };
  }

  /** Appends one entry and returns its id; with `expectedEntryId`, only if it gets that id. */
  async addEntry(
    ledger: LedgerIdLike,
    payload: Uint8Array | string,
    options: { expectedEntryId?: number } = {},
  ): Promise<number> {
    const request: Wire = { ledgerId: LedgerId.from(ledger).toMessage(), payload: toBuffer(payload) };
    if (options.expectedEntryId !== undefined) {
      request.expectedEntryId = entryIdArgument("expectedEntryId", options.expectedEntryId);
    }
    const response = await this.unary(this.ledgers, "AddEntry", request);
    return safeNumber("entry_id", response.entryId);
  }

  /** The id the ledger's writer would give its next entry, asked without writing. */
  async nextEntryId(ledger: LedgerIdLike): Promise<number> {
    try {
      await this.addEntry(ledger, Buffer.alloc(0), { expectedEntryId: -1 });
    } catch (error) {
      if (error instanceof FailedPreconditionError && error.reason === UNEXPECTED_ENTRY_ID) {
        return safeNumber("next_entry_id", error.metadata.next_entry_id);
      }
      throw error;
    }
    throw new FailedPreconditionError(9, "expected_entry_id -1 was accepted");
  }

  /**
   * A write session (AppendEntries). `await writer.write(...)` returns once
   * the stream takes more, so a fast producer waits for the gateway;
   * `await writer.end()` waits for every acknowledgement.
   */
  writer(ledger: LedgerIdLike, options: { expectedEntryId?: number; onAck?: (ack: AppendAck) => void } = {}): LedgerWriter {
    const call = this.ledgers.AppendEntries(new Metadata(), {}) as ClientDuplexStream<Wire, Wire>;
    return new LedgerWriter(call, LedgerId.from(ledger), options.expectedEntryId, options.onAck);
  }

  /**
   * Appends every payload in one write session, up to `batchSize` entries
   * and about `batchBytes` (default 1 MiB) per message, well under the
   * services' message bound; returns the last entry id (-1 if none).
   */
  async appendAll(
    ledger: LedgerIdLike,
    payloads: Payloads,
    options: { batchSize?: number; batchBytes?: number } = {},
  ): Promise<number> {
    const batchSize = options.batchSize ?? 100;
    const batchBytes = options.batchBytes ?? 1024 * 1024;
    const writer = this.writer(ledger);
    let batch: Buffer[] = [];
    let bytes = 0;
    try {
      for await (const payload of payloads) {
        const buffer = toBuffer(payload);
        if (batch.length && bytes + buffer.length > batchBytes) {
          await writer.write(batch);
          batch = [];
          bytes = 0;
        }
        batch.push(buffer);
        bytes += buffer.length;
        if (batch.length >= batchSize) {
          await writer.write(batch);
          batch = [];
          bytes = 0;
        }
      }
      if (batch.length) await writer.write(batch);
    } catch (error) {
      writer.cancel();
      throw error;
    }
    return writer.end();
  }

  /**
   * Entries first..last (last -1: up to the LAC), in order. With
   * `unconfirmed`, past the LAC too (last must then be given). A read that
   * fails UNAVAILABLE resumes from the next entry (at the next gateway, if
   * several were given), at most `resumeAttempts` times in a row.
   */
  read(
    ledger: LedgerIdLike,
    options: { first?: number; last?: number; unconfirmed?: boolean } = {},
  ): AsyncGenerator<Entry> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    const last = options.last ?? -1;
    const method = options.unconfirmed ? "ReadUnconfirmedEntries" : "ReadEntries";
    entryIdArgument("last", last);
    return this.resumable(options.first ?? 0, last, (next) =>
      this.ledgers[method]({
        ledgerId,
        firstEntryId: entryIdArgument("first", next),
        lastEntryId: String(last),
      }) as ClientReadableStream<Wire>,
    );
  }

  /**
   * One confirmed entry (ReadEntry), by read()'s rules with first = last =
   * entryId: past the LAC an OutOfRangeError (reason
   * ERROR_REASON_READ_BEYOND_LAC, metadata last_add_confirmed), an unknown
   * ledger a NotFoundError. One call, not resumed.
   */
  async readEntry(ledger: LedgerIdLike, entryId: number): Promise<Entry> {
    const response = await this.unary(this.ledgers, "ReadEntry", {
      ledgerId: LedgerId.from(ledger).toMessage(),
      entryId: entryIdArgument("entryId", entryId),
    });
    return toEntry(response.entry);
  }

  /**
   * The confirmed entries `entryIds` (any order, repeats allowed), read one
   * by one over a single ReadEntryStream: one item per id, in the order of
   * `entryIds`. An id that fails (past the LAC, ...) yields the QuireError
   * readEntry() would have thrown, without throwing, and the next ids are
   * still read. A failure of the stream itself (the gateway lost,
   * PERMISSION_DENIED, ...) is thrown; it is not resumed.
   */
  async *readEntriesById(ledger: LedgerIdLike, entryIds: Iterable<number>): AsyncGenerator<Entry | QuireError> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    const wanted = Array.from(entryIds, (id) => entryIdArgument("entryId", id));
    if (wanted.length === 0) return;
    const call = this.ledgers.ReadEntryStream(new Metadata(), { deadline: Date.now() + this.timeoutMs * 10 }) as ClientDuplexStream<Wire, Wire>;
    // Sent while the answers are read: the gateway reads ahead only so far, so
    // waiting for every request to go out first could wait for ever.
    const sending = (async () => {
      for (const entryId of wanted) {
        if (call.destroyed || call.writableEnded) return; // the call ended: its status says why
        if (!call.write({ ledgerId, entryId })) await writable(call);
      }
      if (!call.destroyed) call.end();
    })();
    sending.catch(() => call.cancel());
    let answered = 0;
    try {
      for await (const response of call as AsyncIterable<Wire>) {
        answered += 1;
        yield response.result === "error" ? toReadError(response.error) : toEntry(response.entry);
      }
    } catch (failure) {
      throw translate(failure);
    } finally {
      call.cancel();
    }
    if (answered !== wanted.length) {
      throw new UnavailableError(14, `the read stream ended after ${answered} of ${wanted.length} answers`);
    }
  }

  /**
   * Confirmed entries from `first` on as they are confirmed; ends once the
   * ledger is closed and its last entry delivered. Resumes after
   * UNAVAILABLE like read().
   */
  tail(ledger: LedgerIdLike, options: { first?: number } = {}): AsyncGenerator<Entry> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    return this.resumable(options.first ?? 0, -1, (next) =>
      this.ledgers.TailEntries({ ledgerId, firstEntryId: entryIdArgument("first", next) }) as ClientReadableStream<Wire>,
    );
  }

  private async *resumable(
    first: number,
    last: number,
    open: (next: number) => ClientReadableStream<Wire>,
  ): AsyncGenerator<Entry> {
    let next = first;
    let attempt = 0;
    for (;;) {
      const used = this.current;
      const call = open(next);
      try {
        for await (const response of call) {
          for (const wire of response.entries as Wire[]) {
            const entry = toEntry(wire);
            next = entry.entryId + 1;
            attempt = 0;
            yield entry;
          }
        }
        return;
      } catch (failure) {
        const error = translate(failure);
        if (!(error instanceof UnavailableError) || attempt >= this.resumeAttempts) throw error;
        if (last >= 0 && next > last) return; // everything asked for was delivered
        attempt += 1;
        this.failOver(used);
        await sleep(this.backoff(attempt, error.retryDelayMs));
      } finally {
        call.cancel();
      }
    }
  }

  private backoff(attempt: number, suggestedMs?: number): number {
    const [firstMs, longestMs] = this.resumeBackoffMs;
    return Math.max(suggestedMs ?? 0, Math.min(firstMs * 2 ** (attempt - 1), longestMs));
  }

  async lastAddConfirmed(ledger: LedgerIdLike): Promise<number> {
    const response = await this.unary(this.ledgers, "ReadLastAddConfirmed", { ledgerId: LedgerId.from(ledger).toMessage() });
    return safeNumber("last_add_confirmed", response.lastAddConfirmed);
  }

  async closeLedger(ledger: LedgerIdLike): Promise<LedgerMetadata> {
    const response = await this.unary(this.ledgers, "CloseLedger", { ledgerId: LedgerId.from(ledger).toMessage() });
    return toMetadata(response.metadata);
  }

  async deleteLedger(ledger: LedgerIdLike): Promise<void> {
    await this.unary(this.ledgers, "DeleteLedger", { ledgerId: LedgerId.from(ledger).toMessage() });
  }

  async ledgerMetadata(ledger: LedgerIdLike): Promise<{ metadata: LedgerMetadata; version: string }> {
    const response = await this.unary(this.ledgers, "GetLedgerMetadata", { ledgerId: LedgerId.from(ledger).toMessage() });
    return { metadata: toMetadata(response.metadata), version: String(response.version) };
  }

  /** Every ledger of a scope (or of all scopes, scopeId undefined), page by page. */
  async *listLedgers(options: { scopeId?: bigint | number | string; pageSize?: number } = {}): AsyncGenerator<LedgerMetadata> {
    let pageToken = "";
    do {
      const response = await this.unary(this.ledgers, "ListLedgers", {
        scopeId: toU64("scopeId", options.scopeId ?? 0).toString(),
        allScopes: options.scopeId === undefined,
        pageSize: options.pageSize ?? 100,
        pageToken,
      });
      for (const wire of response.ledgers as Wire[]) yield toMetadata(wire);
      pageToken = response.nextPageToken;
    } while (pageToken);
  }

  /** Stores a blob (bytes, or parts streamed in order) and returns its id. */
  async putBlob(
    data: Uint8Array | string | Payloads,
    options: { scopeId?: bigint | number | string; partBytes?: number } = {},
  ): Promise<string> {
    const scopeId = toU64("scopeId", options.scopeId ?? 0).toString();
    const partBytes = options.partBytes ?? 1024 * 1024;
    return new Promise<string>((resolve, reject) => {
      const call = this.blobs.PutBlob(new Metadata(), {}, (error: ServiceError | null, response: Wire) => {
        if (error) reject(translate(error));
        else resolve(response.blobId);
      }) as ClientWritableStream<Wire>;
      (async () => {
        const parts: Payloads = typeof data === "string" || data instanceof Uint8Array ? [data] : data;
        let first = true;
        for await (const part of parts) {
          const bytes = toBuffer(part);
          for (let start = 0; start < bytes.length || first; start += partBytes) {
            const message = { scopeId: first ? scopeId : "0", data: bytes.subarray(start, start + partBytes) };
            first = false;
            if (!call.write(message)) await writable(call);
          }
        }
        if (first) call.write({ scopeId, data: Buffer.alloc(0) });
        call.end();
      })().catch((error) => {
        call.cancel();
        reject(error);
      });
    });
  }

  /** A blob's parts as they arrive. */
  async *getBlobParts(blobId: string): AsyncGenerator<Buffer> {
    const call = this.blobs.GetBlob({ blobId }) as ClientReadableStream<Wire>;
    try {
      for await (const response of call) yield response.data as Buffer;
    } catch (error) {
      throw translate(error);
    } finally {
      call.cancel();
    }
  }

  async getBlob(blobId: string): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const part of this.getBlobParts(blobId)) parts.push(part);
    return Buffer.concat(parts);
  }
}

/** One AppendEntries session; see QuireClient.writer(). */
export class LedgerWriter {
  readonly ledger: LedgerId;
  /** The last acknowledged entry id; -1 before the first acknowledgement. */
  lastEntryId = -1;
  /** How many times write() waited for the stream to drain (back-pressure at work). */
  drainWaits = 0;
  private sent = 0;
  private acknowledged = 0;
  private failure?: unknown;
  private readonly finished: Promise<void>;

  constructor(
    private readonly call: ClientDuplexStream<Wire, Wire>,
    ledger: LedgerId,
    expectedEntryId: number | undefined,
    onAck?: (ack: AppendAck) => void,
  ) {
    this.ledger = ledger;
    this.finished = new Promise((resolve) => {
      call.on("data", (wire: Wire) => {
        const ack = toAck(wire);
        this.acknowledged += ack.lastEntryId - ack.firstEntryId + 1;
        this.lastEntryId = ack.lastEntryId;
        onAck?.(ack);
      });
      call.on("error", (error) => {
        this.failure ??= translate(error);
        resolve();
      });
      call.on("end", () => resolve());
    });
    const first: Wire = { ledgerId: ledger.toMessage(), payloads: [] };
    if (expectedEntryId !== undefined) first.expectedEntryId = entryIdArgument("expectedEntryId", expectedEntryId);
    call.write(first);
  }

  /** Sends payloads (one message); resolves once the stream can take more. */
  async write(payloads: Uint8Array | string | Array<Uint8Array | string>): Promise<void> {
    if (this.failure) throw this.failure;
    const list = Array.isArray(payloads) ? payloads.map(toBuffer) : [toBuffer(payloads)];
    if (list.length === 0) return;
    this.sent += list.length;
    if (!this.call.write({ payloads: list })) {
      this.drainWaits += 1;
      await writable(this.call);
    }
    if (this.failure) throw this.failure;
  }

  /** Ends the session once every entry is acknowledged; returns the last entry id (-1 if none). */
  async end(): Promise<number> {
    this.call.end();
    await this.finished;
    if (this.failure) throw this.failure;
    if (this.acknowledged < this.sent) {
      throw new UnavailableError(14, `the write session ended with ${this.sent - this.acknowledged} entries unacknowledged`);
    }
    return this.lastEntryId;
  }

  /** Abandons the session: entries not acknowledged may or may not be stored. */
  cancel(): void {
    this.call.cancel();
  }
}


