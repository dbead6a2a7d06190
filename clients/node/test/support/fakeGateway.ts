// An in-process LedgerService holding one ledger in memory, for the unit
// tests of the client's own logic (resumption, back-pressure, abort and
// deadlines): it keeps the rules a real gateway keeps for conditional
// appends, and can break or stall a session on request. Not a test file.
import {
  Metadata,
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
} from "@grpc/grpc-js";
import { encodeDetails } from "../../src";
import { loadGatewayServices } from "../../src/protos";

type Wire = Record<string, any>;

function refusal(code: number, message: string, reason: string, metadata: Record<string, string>) {
  const trailers = new Metadata();
  trailers.set("grpc-status-details-bin", encodeDetails(code, message, { reason, metadata }));
  return { code, details: message, metadata: trailers };
}

export class FakeGateway {
  target = "";
  /** Named as the ledger's owner in each session's first acknowledgement, when set. */
  ownerAddress = "";
  /** Each AppendEntries session: the expected_entry_id it carried, if any. */
  readonly sessions: Array<{ expected?: number }> = [];
  /** The next session fails UNAVAILABLE once it has stored this many entries, the last batch unacknowledged. */
  breakSessionAfter?: number;
  /** The next refusal reports the LAC one short of the last entry (set when a session breaks). */
  private lagNextRefusal = false;
  /** Entries another writer appends when the next session breaks. */
  foreignOnBreak: Buffer[] = [];
  /** Sessions store entries but acknowledge none until release(). */
  withholdAcks = false;
  /** AppendEntries messages with payloads received (for message counting). */
  payloadMessages = 0;
  private readonly withheld: Array<() => void> = [];
  private server = new Server();

  /** `stored`: the ledger's entries, in id order; two fakes given the same array are two gateways of one ledger. */
  constructor(readonly stored: Buffer[] = []) {}

  async start(): Promise<this> {
    const { LedgerService } = loadGatewayServices();
    this.server.addService(LedgerService.service, {
      AppendEntries: (call: ServerDuplexStream<Wire, Wire>) => this.appendEntries(call),
      AddEntry: (call: ServerUnaryCall<Wire, Wire>, callback: sendUnaryData<Wire>) => this.addEntry(call, callback),
      // These never answer: a call to them ends only by its signal or deadline.
      GetLedgerMetadata: () => undefined,
      TailEntries: () => undefined,
    });
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    this.target = `127.0.0.1:${port}`;
    return this;
  }

  stop(): void {
    this.server.forceShutdown();
  }

  /** Sends the acknowledgements held back, and stops holding them. */
  release(): void {
    this.withholdAcks = false;
    for (const send of this.withheld.splice(0)) send();
  }

  private lastAddConfirmed(): number {
    const lac = this.stored.length - 1 - (this.lagNextRefusal ? 1 : 0);
    this.lagNextRefusal = false;
    return lac;
  }

  private unexpected(expected: number) {
    return refusal(status.FAILED_PRECONDITION, `expected entry id ${expected}, next is ${this.stored.length}`, "ERROR_REASON_UNEXPECTED_ENTRY_ID", {
      next_entry_id: String(this.stored.length),
      last_add_confirmed: String(this.lastAddConfirmed()),
    });
  }

  private addEntry(call: ServerUnaryCall<Wire, Wire>, callback: sendUnaryData<Wire>): void {
    const expected = call.request.expectedEntryId;
    if (expected != null && Number(expected) !== this.stored.length) {
      callback(this.unexpected(Number(expected)));
      return;
    }
    this.stored.push(call.request.payload as Buffer);
    const id = String(this.stored.length - 1);
    callback(null, { entryId: id, lastAddConfirmed: id });
  }

  private appendEntries(call: ServerDuplexStream<Wire, Wire>): void {
    const session: { expected?: number; acknowledged?: boolean } = {};
    this.sessions.push(session);
    const breakAfter = this.breakSessionAfter;
    this.breakSessionAfter = undefined;
    let storedHere = 0;
    let checked = false;
    let over = false;
    const fail = (error: object) => {
      over = true;
      call.emit("error", error);
    };
    call.on("data", (request: Wire) => {
      if (over) return;
      if (request.expectedEntryId != null) session.expected = Number(request.expectedEntryId);
      const payloads = request.payloads as Buffer[];
      if (!payloads.length) return;
      this.payloadMessages += 1;
      if (!checked) {
        checked = true;
        if (session.expected !== undefined && session.expected !== this.stored.length) {
          fail(this.unexpected(session.expected));
          return;
        }
      }
      const first = this.stored.length;
      this.stored.push(...payloads);
      storedHere += payloads.length;
      if (breakAfter !== undefined && storedHere >= breakAfter) {
        // The gateway died mid-batch: its writer is still completing these entries.
        this.lagNextRefusal = true;
        this.stored.push(...this.foreignOnBreak);
        fail({ code: status.UNAVAILABLE, details: "the fake gateway dropped the session" });
        return;
      }
      const last = first + payloads.length - 1;
      const owner = session.acknowledged ? null : { gateway: "owner", address: this.ownerAddress, sessionId: "1" };
      session.acknowledged = true;
      const ack = () => {
        if (!over) call.write({ firstEntryId: String(first), lastEntryId: String(last), lastAddConfirmed: String(last), owner });
      };
      if (this.withholdAcks) this.withheld.push(ack);
      else ack();
    });
    call.on("end", () => {
      if (!over) call.end();
    });
    call.on("cancelled", () => (over = true));
  }
}
