/**
 * LedgerWriter: write sessions (AppendEntries) to one ledger as a Node
 * Writable in object mode, one chunk one entry, resumed after a lost stream
 * or gateway without losing or repeating an entry.
 *
 * How resumption stays exact: every entry handed over is kept, in order,
 * until acknowledged, and the writer knows the id the first of them gets
 * (asked with nextEntryId() before the first session, then moved on by the
 * acknowledgements). A new session is a conditional append of that id. If some
 * of the kept entries were stored though their acknowledgement was lost, the
 * ledger's writer refuses with the id it would give next
 * (ERROR_REASON_UNEXPECTED_ENTRY_ID); once its LAC shows them confirmed they
 * count as acknowledged and the rest are sent again. This assumes one writer
 * per ledger, as BookKeeper's ledgers have.
 */
import { Writable } from "node:stream";
import { finished } from "node:stream/promises";
import { status as Status, type ClientDuplexStream } from "@grpc/grpc-js";
import { CallContext, type CallOptions } from "./call";
import { CancelledError, FailedPreconditionError, QuireError, UnavailableError } from "./errors";
import type { LedgerId } from "./ids";
import { entryIdArgument, toAck, toBuffer, type AppendAck, type Wire } from "./wire";

export const UNEXPECTED_ENTRY_ID = "ERROR_REASON_UNEXPECTED_ENTRY_ID";

export interface WriterOptions extends CallOptions {
  /** The first entry must get this id (a conditional append); else it is asked with nextEntryId(). */
  expectedEntryId?: number;
  /** Called with each acknowledgement, in order (also emitted as "ack"). */
  onAck?: (ack: AppendAck) => void;
  /** Entries per AppendEntries message, at most (default 100). */
  batchSize?: number;
  /** Bytes per message, about (default 1 MiB; one larger entry goes alone). */
  batchBytes?: number;
  /** Entries handed over and not yet acknowledged, at most, before write callbacks wait (default 1000). */
  maxInFlightEntries?: number;
  /** The same in bytes (default 16 MiB). */
  maxInFlightBytes?: number;
  /** Entries the Writable buffers before write() returns false (default 16). */
  highWaterMark?: number;
}

/** What a writer needs from its client. */
export interface WriterHost {
  readonly resumeAttempts: number;
  /** A new AppendEntries call to the current gateway, and that gateway's address. */
  openAppendEntries(ctx: CallContext): { call: ClientDuplexStream<Wire, Wire>; target: string };
  nextEntryId(ledger: LedgerId, options: CallOptions): Promise<number>;
  /** After losing gateway `used`: the owner (if followed) or the next gateway. */
  failOver(used: string, ownerAddress: string): void;
  backoff(attempt: number, suggestedMs?: number): number;
}

type Chunk = Uint8Array | string;
type Callback = (error?: Error | null) => void;

interface Session {
  readonly serial: number;
  readonly call: ClientDuplexStream<Wire, Wire>;
  readonly target: string;
  /** How many of the pending entries went out on this session. */
  sent: number;
}

function positive(name: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw new RangeError(`${name} ${value} must be a positive integer`);
  return chosen;
}

export class LedgerWriter extends Writable {
  readonly ledger: LedgerId;
  /** The last acknowledged entry id; -1 before the first acknowledgement. */
  lastEntryId = -1;
  /** Sessions opened again after a failure (a lost stream, a dead gateway). */
  resumptions = 0;
  /** Entries a resumed session found stored though their acknowledgement was lost. */
  landedOnResume = 0;
  /** How many write callbacks waited for acknowledgements to make room (back-pressure at work). */
  backPressureWaits = 0;

  private readonly host: WriterHost;
  private readonly ctx: CallContext;
  private readonly onAck?: (ack: AppendAck) => void;
  private readonly batchSize: number;
  private readonly batchBytes: number;
  private readonly maxInFlightEntries: number;
  private readonly maxInFlightBytes: number;
  /** Entries handed over and not acknowledged, in order; pending[0] gets id nextId. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private nextId?: number;
  private session?: Session;
  private serial = 0;
  /** Failed attempts since the last progress. */
  private attempt = 0;
  private ownerAddress = "";
  /** Some pending entries went out on a session that failed: they may be stored already. */
  private unsure = false;
  /** A session is being opened, or a pause comes before the next one. */
  private opening = false;
  private pumpScheduled = false;
  /** A write callback held until acknowledgements make room. */
  private heldWrite?: Callback;
  /** _final's callback, held until every entry is acknowledged. */
  private heldFinal?: Callback;
  private readonly stopWatchingAbort: () => void;

  constructor(host: WriterHost, ledger: LedgerId, options: WriterOptions = {}) {
    super({ objectMode: true, highWaterMark: positive("highWaterMark", options.highWaterMark, 16) });
    this.host = host;
    this.ledger = ledger;
    this.ctx = new CallContext(options);
    this.onAck = options.onAck;
    this.batchSize = positive("batchSize", options.batchSize, 100);
    this.batchBytes = positive("batchBytes", options.batchBytes, 1024 * 1024);
    this.maxInFlightEntries = positive("maxInFlightEntries", options.maxInFlightEntries, 1000);
    this.maxInFlightBytes = positive("maxInFlightBytes", options.maxInFlightBytes, 16 * 1024 * 1024);
    if (options.expectedEntryId !== undefined) {
      entryIdArgument("expectedEntryId", options.expectedEntryId);
      this.nextId = options.expectedEntryId;
    }
    // A failure reaches every write callback, append(), close(), pipeline()
    // and finished(): it must not also crash a process that listens to none
    // of the stream's events.
    this.on("error", () => undefined);
    // The deadline needs no timer of its own: each session's call and the
    // nextEntryId call carry it, and the pauses between them stop at it.
    this.stopWatchingAbort = this.ctx.onAbort(() => this.destroy(this.ctx.stopped()));
  }

  /** Entries handed over and not acknowledged: after a failure, these (ids lastEntryId + 1 on) may or may not be stored. */
  get unacknowledged(): number {
    return this.pending.length;
  }

  /** write() as a promise: resolves once the writer takes more (see maxInFlightEntries), rejects with its failure. */
  append(payload: Chunk): Promise<void> {
    if (this.errored) return Promise.reject(this.errored);
    return new Promise((resolve, reject) => {
      this.write(payload, (error) => (error ? reject(error) : resolve()));
    });
  }

  /** Ends the writer; resolves with the last entry id (-1 if none) once every entry is acknowledged. */
  async close(): Promise<number> {
    if (!this.writableEnded) this.end();
    await finished(this);
    return this.lastEntryId;
  }

  /** Abandons the writer: entries not acknowledged may or may not be stored. */
  cancel(): void {
    this.destroy(new CancelledError(Status.CANCELLED, "the writer was cancelled"));
  }

  override _write(chunk: Chunk, _encoding: BufferEncoding, callback: Callback): void {
    this._writev([{ chunk }], callback);
  }

  override _writev(chunks: Array<{ chunk: Chunk }>, callback: Callback): void {
    let buffers: Buffer[];
    try {
      buffers = chunks.map(({ chunk }) => toBuffer(chunk));
    } catch (error) {
      callback(error as Error);
      return;
    }
    for (const buffer of buffers) {
      this.pending.push(buffer);
      this.pendingBytes += buffer.length;
    }
    this.schedulePump();
    if (this.hasRoom()) callback();
    else {
      this.backPressureWaits += 1;
      this.heldWrite = callback;
    }
  }

  override _final(callback: Callback): void {
    this.heldFinal = callback;
    this.settleIfDone();
  }

  override _destroy(error: Error | null, callback: Callback): void {
    this.stopWatchingAbort();
    this.session?.call.cancel();
    this.session = undefined;
    const held = [this.heldWrite, this.heldFinal];
    this.heldWrite = this.heldFinal = undefined;
    const failure = error ?? new CancelledError(Status.CANCELLED, "the writer was destroyed");
    for (const waiting of held) waiting?.(failure);
    callback(error);
  }

  private hasRoom(): boolean {
    return this.pending.length < this.maxInFlightEntries && this.pendingBytes < this.maxInFlightBytes;
  }

  /** Sends on the next turn, so entries written together go out in one message. */
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Sends the entries the current session has not sent yet, opening a session if there is none. */
  private pump(): void {
    if (this.destroyed) return;
    const session = this.session;
    if (!session) {
      if (this.pending.length && !this.opening) void this.open();
      return;
    }
    while (session.sent < this.pending.length) {
      const batch: Buffer[] = [];
      let bytes = 0;
      for (let i = session.sent; i < this.pending.length && batch.length < this.batchSize; i++) {
        const entry = this.pending[i];
        if (batch.length && bytes + entry.length > this.batchBytes) break;
        batch.push(entry);
        bytes += entry.length;
      }
      session.call.write({ payloads: batch });
      session.sent += batch.length;
    }
  }

  /** Opens a session (after asking the next entry id, the first time). */
  private async open(): Promise<void> {
    this.opening = true;
    const serial = ++this.serial;
    try {
      this.ctx.check();
      this.nextId ??= await this.host.nextEntryId(this.ledger, { signal: this.ctx.signal, ...this.remainingTime() });
    } catch (error) {
      this.opening = false;
      if (serial === this.serial) this.failed(serial, "", error);
      return;
    }
    this.opening = false;
    if (this.destroyed || serial !== this.serial) return;
    const { call, target } = this.host.openAppendEntries(this.ctx);
    this.session = { serial, call, target, sent: 0 };
    call.on("data", (wire: Wire) => this.acknowledged(serial, wire));
    call.on("error", (error: Error) => this.failed(serial, target, error));
    call.on("end", () => this.failed(serial, target, new UnavailableError(Status.UNAVAILABLE, "the write session ended early")));
    call.write({
      ledgerId: this.ledger.toMessage(),
      payloads: [],
      expectedEntryId: entryIdArgument("expectedEntryId", this.nextId),
    });
    this.pump();
  }

  private remainingTime(): { timeoutMs?: number } {
    return this.ctx.deadline === undefined ? {} : { timeoutMs: Math.max(1, this.ctx.deadline - Date.now()) };
  }

  private acknowledged(serial: number, wire: Wire): void {
    if (serial !== this.serial || this.destroyed) return; // a late answer of a replaced session
    const ack = toAck(wire);
    if (ack.owner?.address) this.ownerAddress = ack.owner.address;
    this.settle(ack.lastEntryId - ack.firstEntryId + 1);
    this.nextId = ack.lastEntryId + 1;
    this.attempt = 0;
    this.reportAck(ack);
  }

  /** The first `count` pending entries are stored: forget them and make room. */
  private settle(count: number): void {
    const done = this.pending.splice(0, count);
    for (const entry of done) this.pendingBytes -= entry.length;
    if (this.session) this.session.sent = Math.max(0, this.session.sent - done.length);
    if (!this.pending.length) this.unsure = false;
    if (this.heldWrite && this.hasRoom()) {
      const release = this.heldWrite;
      this.heldWrite = undefined;
      release();
    }
    this.settleIfDone();
  }

  private reportAck(ack: AppendAck): void {
    this.lastEntryId = ack.lastEntryId;
    this.onAck?.(ack);
    this.emit("ack", ack);
  }

  /** Once ended and every entry is acknowledged: the session ends and so does the writer. */
  private settleIfDone(): void {
    if (!this.heldFinal || this.pending.length) return;
    const done = this.heldFinal;
    this.heldFinal = undefined;
    this.stopWatchingAbort();
    const session = this.session;
    this.session = undefined;
    this.serial += 1; // whatever the ended session says now changes nothing
    session?.call.end();
    done();
  }

  /** A session (or the nextEntryId before it) failed: resume, or fail the writer. */
  private failed(serial: number, target: string, cause: unknown): void {
    if (serial !== this.serial || this.destroyed) return;
    if (this.session?.sent) this.unsure = true;
    this.session?.call.cancel();
    this.session = undefined;
    this.serial += 1; // whatever the failed session says now changes nothing
    const error = this.ctx.failure(cause);
    const stop = this.ctx.stopped();
    if (stop) return void this.destroy(stop);
    if (!this.pending.length) return; // idle: the next write opens a new session
    if (this.unsure && error instanceof FailedPreconditionError && error.reason === UNEXPECTED_ENTRY_ID) {
      this.resumeAfterRefusal(error);
      return;
    }
    if (!(error instanceof UnavailableError)) return void this.destroy(error as Error);
    this.retry(error, () => this.host.failOver(target, this.ownerAddress));
  }

  /** A resumed session's condition failed: which of the pending entries landed? */
  private resumeAfterRefusal(error: FailedPreconditionError): void {
    const actual = Number(error.metadata.next_entry_id ?? NaN);
    const confirmed = Number(error.metadata.last_add_confirmed ?? NaN);
    const landed = actual - (this.nextId as number);
    if (!Number.isSafeInteger(landed) || landed < 0 || landed > this.pending.length) {
      const message = `another writer wrote ledger ${this.ledger.qualifiedName} (${error.message})`;
      return void this.destroy(new FailedPreconditionError(error.code, message, error));
    }
    if (confirmed < actual - 1) {
      // The owner is still completing them: ask again once it may be done.
      this.retry(error, () => undefined);
      return;
    }
    const first = this.nextId as number;
    this.landedOnResume += landed;
    this.nextId = actual;
    this.attempt = 0;
    this.settle(landed);
    if (landed) this.reportAck({ firstEntryId: first, lastEntryId: actual - 1, lastAddConfirmed: confirmed });
    if (this.pending.length) void this.open();
  }

  private retry(error: QuireError, beforeNextAttempt: () => void): void {
    this.attempt += 1;
    if (this.attempt > this.host.resumeAttempts) return void this.destroy(error);
    this.resumptions += 1;
    beforeNextAttempt();
    this.opening = true; // new writes wait for the session after the pause
    const serial = this.serial;
    this.ctx.pause(this.host.backoff(this.attempt, error.retryDelayMs)).then(
      () => {
        if (serial === this.serial && !this.destroyed) void this.open();
      },
      (stopped: Error) => this.destroy(stopped),
    );
  }
}
