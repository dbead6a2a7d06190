/**
 * Typed errors. A Quire service puts a google.rpc.Status in the
 * grpc-status-details-bin trailer; its details carry a google.rpc.ErrorInfo
 * (reason such as ERROR_REASON_LEDGER_FENCED, domain "quire", metadata) and,
 * where the service suggests a pause before retrying, a google.rpc.RetryInfo.
 * Both are decoded defensively: a missing or undecodable trailer leaves the
 * reason empty and the error is still typed by its gRPC code.
 */
import { Metadata, status as Status, type ServiceError } from "@grpc/grpc-js";
import * as protobuf from "protobufjs";
import type { ErrorReason } from "./enums";

const STATUS_DETAILS_KEY = "grpc-status-details-bin";
const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";
const RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo";

// The three google.rpc messages (and Any/Duration), described inline so the
// client needs no copy of googleapis' protos to read them.
const rpcTypes = protobuf.Root.fromJSON(<protobuf.INamespace>{
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { typeUrl: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
            Duration: { fields: { seconds: { type: "int64", id: 1 }, nanos: { type: "int32", id: 2 } } },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 },
              },
            },
            ErrorInfo: {
              fields: {
                reason: { type: "string", id: 1 },
                domain: { type: "string", id: 2 },
                metadata: { keyType: "string", type: "string", id: 3 },
              },
            },
            RetryInfo: { fields: { retryDelay: { type: "google.protobuf.Duration", id: 1 } } },
          },
        },
      },
    },
  },
});
const StatusType = rpcTypes.lookupType("google.rpc.Status");
const ErrorInfoType = rpcTypes.lookupType("google.rpc.ErrorInfo");
const RetryInfoType = rpcTypes.lookupType("google.rpc.RetryInfo");

/** Codes whose failures may succeed when retried (the services' own rule). */
const RETRYABLE_CODES = new Set<number>([Status.UNAVAILABLE, Status.ABORTED, Status.RESOURCE_EXHAUSTED]);

export interface ErrorDetails {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
  /** From RetryInfo, when the service sent one. */
  retryDelayMs?: number;
}

/** A gRPC status code's name ("FAILED_PRECONDITION"), or CODE_n for a number gRPC does not name. */
export type CodeName = keyof typeof Status | `CODE_${number}`;

export class QuireError extends Error {
  /** The numeric gRPC status code. */
  readonly code: number;
  /** Its name, e.g. "FAILED_PRECONDITION". */
  readonly codeName: CodeName;
  /** The ErrorInfo reason, e.g. "ERROR_REASON_LEDGER_CLOSED"; "" when none was sent. */
  readonly reason: ErrorReason | "";
  /** The ErrorInfo metadata (for example next_entry_id, last_add_confirmed). */
  readonly metadata: Record<string, string>;
  /** Whether the same call may succeed later. */
  readonly retryable: boolean;
  /** The pause the service asked for before a retry (RetryInfo), if any. */
  readonly retryDelayMs?: number;

  constructor(code: number, message: string, details: Partial<ErrorDetails> = {}) {
    const codeName = (Status[code] ?? `CODE_${code}`) as CodeName;
    super(details.reason ? `${codeName} ${details.reason}: ${message}` : `${codeName}: ${message}`);
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.reason = (details.reason ?? "") as ErrorReason | "";
    this.metadata = details.metadata ?? {};
    this.retryDelayMs = details.retryDelayMs;
    this.retryable = details.retryDelayMs !== undefined || RETRYABLE_CODES.has(code);
  }
}

export class InvalidArgumentError extends QuireError {}
export class NotFoundError extends QuireError {}
export class OutOfRangeError extends QuireError {}
export class FailedPreconditionError extends QuireError {}
export class AbortedError extends QuireError {}
export class AlreadyExistsError extends QuireError {}
export class PermissionDeniedError extends QuireError {}
export class UnauthenticatedError extends QuireError {}
export class UnavailableError extends QuireError {}
export class ResourceExhaustedError extends QuireError {}
export class DataLossError extends QuireError {}
/** The outcome is unknown: a write may or may not have been stored. */
export class DeadlineExceededError extends QuireError {}
/** The call was cancelled (gRPC CANCELLED); a write's outcome is then unknown. */
export class CancelledError extends QuireError {}

/**
 * A call stopped by its AbortSignal: a CancelledError named "AbortError" (the
 * name fetch() and Node's own APIs give theirs), with the signal's reason as
 * `cause`. A write's outcome is unknown.
 */
export class AbortError extends CancelledError {
  constructor(message = "the call was aborted", reason?: unknown) {
    super(Status.CANCELLED, message);
    this.name = "AbortError";
    if (reason !== undefined) Object.defineProperty(this, "cause", { value: reason, configurable: true, writable: true });
  }
}

const ERRORS_BY_CODE: Record<number, typeof QuireError> = {
  [Status.INVALID_ARGUMENT]: InvalidArgumentError,
  [Status.NOT_FOUND]: NotFoundError,
  [Status.OUT_OF_RANGE]: OutOfRangeError,
  [Status.FAILED_PRECONDITION]: FailedPreconditionError,
  [Status.ABORTED]: AbortedError,
  [Status.ALREADY_EXISTS]: AlreadyExistsError,
  [Status.PERMISSION_DENIED]: PermissionDeniedError,
  [Status.UNAUTHENTICATED]: UnauthenticatedError,
  [Status.UNAVAILABLE]: UnavailableError,
  [Status.RESOURCE_EXHAUSTED]: ResourceExhaustedError,
  [Status.DATA_LOSS]: DataLossError,
  [Status.DEADLINE_EXCEEDED]: DeadlineExceededError,
  [Status.CANCELLED]: CancelledError,
};

/** The typed error for a gRPC status and its trailers. */
export function quireError(code: number, message: string, trailers?: Metadata): QuireError {
  const ErrorClass = ERRORS_BY_CODE[code] ?? QuireError;
  return new ErrorClass(code, message, trailers ? decodeDetails(trailers) : {});
}

/** The typed error for a code and details that came without a call's trailers (a ReadEntryStream answer). */
export function quireErrorFromDetails(code: number, message: string, details: Partial<ErrorDetails>): QuireError {
  const ErrorClass = ERRORS_BY_CODE[code] ?? QuireError;
  return new ErrorClass(code, message, details);
}

/** A grpc-js failure as a QuireError; anything else unchanged. */
export function translate(error: unknown): unknown {
  if (error instanceof QuireError) return error;
  const service = error as Partial<ServiceError>;
  if (error instanceof Error && typeof service.code === "number") {
    return quireError(service.code, service.details ?? error.message, service.metadata);
  }
  return error;
}

/** Reason, metadata and retry delay from the status-details trailer. */
export function decodeDetails(trailers: Metadata): Partial<ErrorDetails> {
  const found: Partial<ErrorDetails> = {};
  for (const value of trailers.get(STATUS_DETAILS_KEY)) {
    if (!Buffer.isBuffer(value)) continue;
    let status: { details?: Array<{ typeUrl?: string; value?: Uint8Array }> };
    try {
      status = StatusType.toObject(StatusType.decode(value), { longs: Number, defaults: true }) as typeof status;
    } catch {
      continue; // not a google.rpc.Status: the code alone types the error
    }
    for (const detail of status.details ?? []) {
      try {
        if (detail.typeUrl === ERROR_INFO_TYPE && detail.value) {
          const info = ErrorInfoType.toObject(ErrorInfoType.decode(detail.value), { defaults: true });
          found.reason = String(info.reason ?? "");
          found.domain = String(info.domain ?? "");
          found.metadata = { ...(info.metadata as Record<string, string>) };
        } else if (detail.typeUrl === RETRY_INFO_TYPE && detail.value) {
          const retry = RetryInfoType.toObject(RetryInfoType.decode(detail.value), { longs: Number, defaults: true });
          const delay = (retry.retryDelay ?? {}) as { seconds?: number; nanos?: number };
          found.retryDelayMs = (delay.seconds ?? 0) * 1000 + Math.round((delay.nanos ?? 0) / 1e6);
        }
      } catch {
        // one undecodable detail does not hide the others
      }
    }
  }
  return found;
}

/** Used by the unit tests and by servers-in-tests: a status-details trailer. */
export function encodeDetails(code: number, message: string, details: Partial<ErrorDetails>): Buffer {
  const any: Array<{ typeUrl: string; value: Uint8Array }> = [];
  if (details.reason !== undefined) {
    const info = ErrorInfoType.create({ reason: details.reason, domain: details.domain ?? "quire", metadata: details.metadata ?? {} });
    any.push({ typeUrl: ERROR_INFO_TYPE, value: ErrorInfoType.encode(info).finish() });
  }
  if (details.retryDelayMs !== undefined) {
    const ms = details.retryDelayMs;
    const retry = RetryInfoType.create({ retryDelay: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 } });
    any.push({ typeUrl: RETRY_INFO_TYPE, value: RetryInfoType.encode(retry).finish() });
  }
  return Buffer.from(StatusType.encode(StatusType.create({ code, message, details: any })).finish());
}
