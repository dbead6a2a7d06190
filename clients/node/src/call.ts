/**
 * Per-call options (an AbortSignal and a deadline) and what they do to a
 * call: one place for how a call is stopped and which error it then fails with.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { status as Status } from "@grpc/grpc-js";
import { AbortError, DeadlineExceededError, translate } from "./errors";

/** Options every call takes. */
export interface CallOptions {
  /** Stops the call: it fails with an AbortError (a write's outcome is then unknown). */
  signal?: AbortSignal;
  /**
   * The call's deadline, in milliseconds from now; past it the call fails with
   * a DeadlineExceededError. For a stream (read, tail, a writer) it bounds the
   * whole call, resumptions included. Default: the client's `timeoutMs` for
   * calls with one answer, none for streams.
   */
  timeoutMs?: number;
  /** The same as an absolute time; with `timeoutMs` too, the earlier one counts. */
  deadline?: Date;
}

/** An abortable thing: a gRPC call. */
interface Cancellable {
  cancel(): void;
}

export class CallContext {
  readonly signal?: AbortSignal;
  /** Epoch milliseconds, or undefined for none. */
  readonly deadline?: number;

  constructor(options: CallOptions, defaultTimeoutMs?: number) {
    for (const [name, value] of [["timeoutMs", options.timeoutMs], ["defaultTimeoutMs", defaultTimeoutMs]] as const) {
      if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
        throw new RangeError(`${name} ${value} must be a positive number of milliseconds`);
      }
    }
    if (options.deadline !== undefined && Number.isNaN(options.deadline.getTime())) {
      throw new RangeError("deadline is an invalid Date");
    }
    this.signal = options.signal;
    const candidates = [
      options.timeoutMs ?? (options.deadline === undefined ? defaultTimeoutMs : undefined),
      options.deadline === undefined ? undefined : options.deadline.getTime() - Date.now(),
    ].filter((ms): ms is number => ms !== undefined);
    this.deadline = candidates.length ? Date.now() + Math.min(...candidates) : undefined;
  }

  /** gRPC's call options: the deadline, if any. */
  grpcOptions(): { deadline?: number } {
    return this.deadline === undefined ? {} : { deadline: this.deadline };
  }

  /** The error to fail with if the call must stop now (aborted or past its deadline), else undefined. */
  stopped(): Error | undefined {
    if (this.signal?.aborted) return new AbortError(undefined, this.signal.reason);
    if (this.deadline !== undefined && Date.now() >= this.deadline) {
      return new DeadlineExceededError(Status.DEADLINE_EXCEEDED, "the call's deadline passed");
    }
    return undefined;
  }

  /** Throws stopped()'s error, if any. */
  check(): void {
    const error = this.stopped();
    if (error) throw error;
  }

  /** A failure of the call as the caller should see it: an AbortError once aborted, else the typed error. */
  failure(error: unknown): unknown {
    if (this.signal?.aborted) return new AbortError(undefined, this.signal.reason);
    return translate(error);
  }

  /** Cancels `call` when the signal aborts; returns the function that stops watching. */
  cancelOnAbort(call: Cancellable): () => void {
    return this.onAbort(() => call.cancel());
  }

  /** Runs `stop` when the signal aborts; returns the function that stops watching. */
  onAbort(stop: () => void): () => void {
    const signal = this.signal;
    if (!signal) return () => undefined;
    if (signal.aborted) {
      stop();
      return () => undefined;
    }
    signal.addEventListener("abort", stop, { once: true });
    return () => signal.removeEventListener("abort", stop);
  }

  /** A pause between attempts: cut short by an abort, and never past the deadline. */
  async pause(ms: number): Promise<void> {
    this.check();
    const left = this.deadline === undefined ? ms : Math.min(ms, this.deadline - Date.now());
    try {
      await sleep(Math.max(0, left), undefined, { signal: this.signal });
    } catch (error) {
      if (this.signal?.aborted) throw new AbortError(undefined, this.signal.reason);
      throw error;
    }
    this.check();
  }
}
