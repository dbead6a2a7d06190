/**
 * QuireClient: the gateway's LedgerService and BlobService over @grpc/grpc-js.
 * Every call takes an AbortSignal and a deadline (CallOptions, src/call.ts);
 * write sessions are LedgerWriters (src/writer.ts).
 */
import * as fs from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  credentials as grpcCredentials,
  Metadata,
  type ChannelCredentials,
  type Client,
  type ClientDuplexStream,
  type ClientReadableStream,
  type ClientWritableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import { CallContext, type CallOptions } from "./call";
import type { DigestType } from "./enums";
import { FailedPreconditionError, QuireError, UnavailableError } from "./errors";
import { LedgerId, toU64, type LedgerIdLike } from "./ids";
import { loadGatewayServices } from "./protos";
import {
  entryIdArgument,
  safeNumber,
  toBuffer,
  toEntry,
  toMetadata,
  toReadError,
  type Entry,
  type LedgerMetadata,
  type Wire,
} from "./wire";
import { LedgerWriter, UNEXPECTED_ENTRY_ID, type WriterHost, type WriterOptions } from "./writer";

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
  /** Deadline of calls with one answer, in milliseconds, unless a call sets its own (default 30000). */
  timeoutMs?: number;
  tls?: ClientTls;
  /** A bearer token sent as `authorization: Bearer <token>` on every call (needs TLS). */
  token?: string;
  /** More gateways of the same cluster: a read, tail or write session that loses its gateway resumes at the next one. */
  gateways?: string[];
  /** A write session that loses its gateway resumes at the ledger's owner, as its answers name it (when reachable from here). */
  followOwner?: boolean;
  /** Attempts of one resumption of a read, tail or write session (default 10). */
  resumeAttempts?: number;
  /** First and longest pause between those attempts, in milliseconds (default [100, 2000]). */
  resumeBackoffMs?: [number, number];
  /** Where the protos are (default: the package's protos/, or QUIRE_PROTOS_DIR). */
  protosDir?: string;
}

export interface CreateLedgerOptions extends CallOptions {
  /** A new id within this scope. */
  scopeId?: bigint | number | string;
  /** Exactly this id (ALREADY_EXISTS when taken). */
  ledgerId?: LedgerIdLike;
  /** A scope-0 id from the legacy 64-bit generator. */
  legacy?: boolean;
  ensembleSize?: number;
  writeQuorumSize?: number;
  ackQuorumSize?: number;
  /** Default: DIGEST_TYPE_UNSPECIFIED, which the services take as CRC32C. */
  digestType?: DigestType;
  password?: Buffer | string;
  customMetadata?: Record<string, string>;
  /** Idempotency key: a retried create with the same one returns the same ledger. */
  requestId?: string;
}

export interface ReadOptions extends CallOptions {
  first?: number;
  /** -1 (the default): up to the LAC. */
  last?: number;
  /** Past the LAC too (`last` must then be given). */
  unconfirmed?: boolean;
}

export type Payloads = Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>;

// grpc-js clients are untyped here: the services are loaded at run time.
type AnyClient = Client & Record<string, (...args: unknown[]) => unknown>;

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
  readonly followOwner: boolean;
  private readonly resumeBackoffMs: [number, number];
  private readonly targets: string[];
  private readonly credentials: ChannelCredentials;
  private readonly channelOptions: Record<string, string | number>;
  private readonly services: ReturnType<typeof loadGatewayServices>;
  private current = "";
  private ledgers!: AnyClient;
  private blobs!: AnyClient;

  constructor(gateway = "127.0.0.1:7000", options: QuireClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    new CallContext({}, this.timeoutMs); // checks it
    this.resumeAttempts = options.resumeAttempts ?? 10;
    this.resumeBackoffMs = options.resumeBackoffMs ?? [100, 2000];
    this.followOwner = options.followOwner ?? false;
    this.targets = [gateway, ...(options.gateways ?? [])];
    this.credentials = channelCredentials(options.tls, options.token);
    this.channelOptions = {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    };
    if (options.tls?.serverName) this.channelOptions["grpc.ssl_target_name_override"] = options.tls.serverName;
    this.services = loadGatewayServices(options.protosDir);
    this.connect(gateway);
  }

  /** The gateway calls go to now. */
  get gateway(): string {
    return this.current;
  }

  private connect(target: string): void {
    this.ledgers?.close();
    this.blobs?.close();
    this.current = target;
    this.ledgers = new this.services.LedgerService(target, this.credentials, this.channelOptions) as AnyClient;
    this.blobs = new this.services.BlobService(target, this.credentials, this.channelOptions) as AnyClient;
  }

  /**
   * After losing gateway `used` ("" for the current one): the ledger's owner
   * if asked to follow it, else the next gateway given, unless another
   * stream has moved on already.
   */
  private failOver(used: string, ownerAddress = ""): void {
    if (used && used !== this.current) return;
    if (this.followOwner && ownerAddress && ownerAddress !== this.current) {
      this.connect(ownerAddress);
      return;
    }
    if (this.targets.length < 2) return; // one address (a balancer, say): gRPC reconnects to it
    const index = this.targets.indexOf(this.current);
    this.connect(this.targets[(index + 1) % this.targets.length]);
  }

  close(): void {
    this.ledgers.close();
    this.blobs.close();
  }

  /** A call with one answer, stopped by its signal or deadline. */
  private unary(client: AnyClient, method: string, request: Wire, ctx: CallContext): Promise<Wire> {
    const stopped = ctx.stopped();
    if (stopped) return Promise.reject(stopped);
    return new Promise((resolve, reject) => {
      let release = () => undefined as void;
      const call = client[method](request, new Metadata(), ctx.grpcOptions(), (error: ServiceError | null, response: Wire) => {
        release();
        if (error) reject(ctx.failure(error));
        else resolve(response);
      }) as { cancel(): void };
      release = ctx.cancelOnAbort(call);
    });
  }

  private context(options: CallOptions): CallContext {
    return new CallContext(options, this.timeoutMs);
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
    const response = await this.unary(this.ledgers, "CreateLedger", request, this.context(options));
    return toMetadata(response.metadata);
  }

  /** Opens a ledger for reading; with `recovery` fences it and closes it at its agreed end. */
  async openLedger(
    ledger: LedgerIdLike,
    options: CallOptions & { password?: Buffer | string; recovery?: boolean } = {},
  ): Promise<{ metadata: LedgerMetadata; lastAddConfirmed: number }> {
    const request = {
      ledgerId: LedgerId.from(ledger).toMessage(),
      password: Buffer.from(options.password ?? ""),
      recovery: options.recovery ?? false,
    };
    const response = await this.unary(this.ledgers, "OpenLedger", request, this.context(options));
    return {
      metadata: toMetadata(response.metadata),
      lastAddConfirmed: safeNumber("last_add_confirmed", response.lastAddConfirmed),
    };
  }

  /** Appends one entry and returns its id; with `expectedEntryId`, only if it gets that id. */
  async addEntry(
    ledger: LedgerIdLike,
    payload: Uint8Array | string,
    options: CallOptions & { expectedEntryId?: number } = {},
  ): Promise<number> {
    const request: Wire = { ledgerId: LedgerId.from(ledger).toMessage(), payload: toBuffer(payload) };
    if (options.expectedEntryId !== undefined) {
      request.expectedEntryId = entryIdArgument("expectedEntryId", options.expectedEntryId);
    }
    const response = await this.unary(this.ledgers, "AddEntry", request, this.context(options));
    return safeNumber("entry_id", response.entryId);
  }

  /** The id the ledger's writer would give its next entry, asked without writing. */
  async nextEntryId(ledger: LedgerIdLike, options: CallOptions = {}): Promise<number> {
    try {
      await this.addEntry(ledger, Buffer.alloc(0), { ...options, expectedEntryId: -1 });
    } catch (error) {
      if (error instanceof FailedPreconditionError && error.reason === UNEXPECTED_ENTRY_ID) {
        return safeNumber("next_entry_id", error.metadata.next_entry_id);
      }
      throw error;
    }
    throw new FailedPreconditionError(9, "expected_entry_id -1 was accepted");
  }

  /**
   * A write session to one ledger, as a Writable in object mode (one chunk,
   * one entry), resumed through the next gateway (or the balancer again)
   * when its stream or gateway is lost, with no entry lost or written twice.
   * See LedgerWriter and the README.
   */
  writer(ledger: LedgerIdLike, options: WriterOptions = {}): LedgerWriter {
    const host: WriterHost = {
      resumeAttempts: this.resumeAttempts,
      openAppendEntries: (ctx) => ({
        call: this.ledgers.AppendEntries(new Metadata(), ctx.grpcOptions()) as ClientDuplexStream<Wire, Wire>,
        target: this.current,
      }),
      nextEntryId: (id, callOptions) => this.nextEntryId(id, callOptions),
      failOver: (used, ownerAddress) => this.failOver(used, ownerAddress),
      backoff: (attempt, suggestedMs) => this.backoff(attempt, suggestedMs),
    };
    return new LedgerWriter(host, LedgerId.from(ledger), options);
  }

  /**
   * Appends every payload through one writer (pipeline() into it) and
   * returns the last entry id (-1 if none): up to `batchSize` entries and
   * about `batchBytes` (default 1 MiB) per message.
   */
  async appendAll(ledger: LedgerIdLike, payloads: Payloads, options: WriterOptions = {}): Promise<number> {
    const writer = this.writer(ledger, options);
    await pipeline(Readable.from(payloads), writer);
    return writer.lastEntryId;
  }

  /**
   * Entries first..last (last -1: up to the LAC), in order. With
   * `unconfirmed`, past the LAC too (last must then be given). A read that
   * fails UNAVAILABLE resumes from the next entry (at the next gateway, if
   * several were given), at most `resumeAttempts` times in a row.
   */
  read(ledger: LedgerIdLike, options: ReadOptions = {}): AsyncGenerator<Entry> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    const last = options.last ?? -1;
    const method = options.unconfirmed ? "ReadUnconfirmedEntries" : "ReadEntries";
    entryIdArgument("last", last);
    const ctx = new CallContext(options);
    return this.resumable(options.first ?? 0, last, ctx, (next) =>
      this.ledgers[method](
        { ledgerId, firstEntryId: entryIdArgument("first", next), lastEntryId: String(last) },
        new Metadata(),
        ctx.grpcOptions(),
      ) as ClientReadableStream<Wire>,
    );
  }

  /**
   * One confirmed entry (ReadEntry), by read()'s rules with first = last =
   * entryId: past the LAC an OutOfRangeError (reason
   * ERROR_REASON_READ_BEYOND_LAC, metadata last_add_confirmed), an unknown
   * ledger a NotFoundError. One call, not resumed.
   */
  async readEntry(ledger: LedgerIdLike, entryId: number, options: CallOptions = {}): Promise<Entry> {
    const request = { ledgerId: LedgerId.from(ledger).toMessage(), entryId: entryIdArgument("entryId", entryId) };
    const response = await this.unary(this.ledgers, "ReadEntry", request, this.context(options));
    return toEntry(response.entry);
  }

  /**
   * The confirmed entries `entryIds` (any order, repeats allowed), read one
   * by one over a single ReadEntryStream: one item per id, in the order of
   * `entryIds`. An id that fails (past the LAC, ...) yields the QuireError
   * readEntry() would have thrown, without throwing, and the next ids are
   * still read. A failure of the stream itself (the gateway lost,
   * PERMISSION_DENIED, ...) is thrown; it is not resumed. Default deadline:
   * ten times the client's timeoutMs.
   */
  async *readEntriesById(
    ledger: LedgerIdLike,
    entryIds: Iterable<number>,
    options: CallOptions = {},
  ): AsyncGenerator<Entry | QuireError> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    const wanted = Array.from(entryIds, (id) => entryIdArgument("entryId", id));
    if (wanted.length === 0) return;
    const ctx = new CallContext(options, this.timeoutMs * 10);
    ctx.check();
    const call = this.ledgers.ReadEntryStream(new Metadata(), ctx.grpcOptions()) as ClientDuplexStream<Wire, Wire>;
    const release = ctx.cancelOnAbort(call);
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
      throw ctx.failure(failure);
    } finally {
      release();
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
  tail(ledger: LedgerIdLike, options: CallOptions & { first?: number } = {}): AsyncGenerator<Entry> {
    const ledgerId = LedgerId.from(ledger).toMessage();
    const ctx = new CallContext(options);
    return this.resumable(options.first ?? 0, -1, ctx, (next) =>
      this.ledgers.TailEntries(
        { ledgerId, firstEntryId: entryIdArgument("first", next) },
        new Metadata(),
        ctx.grpcOptions(),
      ) as ClientReadableStream<Wire>,
    );
  }

  private async *resumable(
    first: number,
    last: number,
    ctx: CallContext,
    open: (next: number) => ClientReadableStream<Wire>,
  ): AsyncGenerator<Entry> {
    let next = first;
    let attempt = 0;
    for (;;) {
      ctx.check();
      const used = this.current;
      const call = open(next);
      const release = ctx.cancelOnAbort(call);
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
        const error = ctx.failure(failure);
        if (!(error instanceof UnavailableError) || attempt >= this.resumeAttempts) throw error;
        if (last >= 0 && next > last) return; // everything asked for was delivered
        attempt += 1;
        this.failOver(used);
        await ctx.pause(this.backoff(attempt, error.retryDelayMs));
      } finally {
        release();
        call.cancel();
      }
    }
  }

  private backoff(attempt: number, suggestedMs?: number): number {
    const [firstMs, longestMs] = this.resumeBackoffMs;
    return Math.max(suggestedMs ?? 0, Math.min(firstMs * 2 ** (attempt - 1), longestMs));
  }

  async lastAddConfirmed(ledger: LedgerIdLike, options: CallOptions = {}): Promise<number> {
    const request = { ledgerId: LedgerId.from(ledger).toMessage() };
    const response = await this.unary(this.ledgers, "ReadLastAddConfirmed", request, this.context(options));
    return safeNumber("last_add_confirmed", response.lastAddConfirmed);
  }

  async closeLedger(ledger: LedgerIdLike, options: CallOptions = {}): Promise<LedgerMetadata> {
    const request = { ledgerId: LedgerId.from(ledger).toMessage() };
    const response = await this.unary(this.ledgers, "CloseLedger", request, this.context(options));
    return toMetadata(response.metadata);
  }

  async deleteLedger(ledger: LedgerIdLike, options: CallOptions = {}): Promise<void> {
    await this.unary(this.ledgers, "DeleteLedger", { ledgerId: LedgerId.from(ledger).toMessage() }, this.context(options));
  }

  async ledgerMetadata(
    ledger: LedgerIdLike,
    options: CallOptions = {},
  ): Promise<{ metadata: LedgerMetadata; version: string }> {
    const request = { ledgerId: LedgerId.from(ledger).toMessage() };
    const response = await this.unary(this.ledgers, "GetLedgerMetadata", request, this.context(options));
    return { metadata: toMetadata(response.metadata), version: String(response.version) };
  }

  /**
   * Every ledger of a scope (or of all scopes, scopeId undefined), page by
   * page. A deadline given bounds the whole listing; the default bounds each page.
   */
  async *listLedgers(
    options: CallOptions & { scopeId?: bigint | number | string; pageSize?: number } = {},
  ): AsyncGenerator<LedgerMetadata> {
    const whole = options.timeoutMs !== undefined || options.deadline !== undefined ? this.context(options) : undefined;
    let pageToken = "";
    do {
      const request = {
        scopeId: toU64("scopeId", options.scopeId ?? 0).toString(),
        allScopes: options.scopeId === undefined,
        pageSize: options.pageSize ?? 100,
        pageToken,
      };
      const response = await this.unary(this.ledgers, "ListLedgers", request, whole ?? this.context(options));
      for (const wire of response.ledgers as Wire[]) yield toMetadata(wire);
      pageToken = response.nextPageToken;
    } while (pageToken);
  }

  /** Stores a blob (bytes, or parts streamed in order) and returns its id. */
  async putBlob(
    data: Uint8Array | string | Payloads,
    options: CallOptions & { scopeId?: bigint | number | string; partBytes?: number } = {},
  ): Promise<string> {
    const scopeId = toU64("scopeId", options.scopeId ?? 0).toString();
    const partBytes = options.partBytes ?? 1024 * 1024;
    const ctx = new CallContext(options);
    ctx.check();
    return new Promise<string>((resolve, reject) => {
      let release = () => undefined as void;
      const call = this.blobs.PutBlob(new Metadata(), ctx.grpcOptions(), (error: ServiceError | null, response: Wire) => {
        release();
        if (error) reject(ctx.failure(error));
        else resolve(response.blobId);
      }) as ClientWritableStream<Wire>;
      release = ctx.cancelOnAbort(call);
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
        release();
        call.cancel();
        reject(error);
      });
    });
  }

  /** A blob's parts as they arrive. */
  async *getBlobParts(blobId: string, options: CallOptions = {}): AsyncGenerator<Buffer> {
    const ctx = new CallContext(options);
    ctx.check();
    const call = this.blobs.GetBlob({ blobId }, new Metadata(), ctx.grpcOptions()) as ClientReadableStream<Wire>;
    const release = ctx.cancelOnAbort(call);
    try {
      for await (const response of call) yield response.data as Buffer;
    } catch (error) {
      throw ctx.failure(error);
    } finally {
      release();
      call.cancel();
    }
  }

  async getBlob(blobId: string, options: CallOptions = {}): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const part of this.getBlobParts(blobId, options)) parts.push(part);
    return Buffer.concat(parts);
  }
}
