/**
 * QuireContainer: the all-in-one image (`quire:latest`, its `standalone`
 * mode: etcd, registry, placement, N bookies and the gateway in one
 * container) under the npm `testcontainers` package, like the Python
 * client's quire_client.testing.QuireContainer.
 *
 * The container runs on the engine's default bridge network. Every service
 * gets a port chosen free here and published on the same number on the
 * Docker host, and the services advertise that host (testcontainers' runtime
 * host: the engine's address for a remote or TCP engine), so the addresses a
 * client is told about (bookie endpoints, the gateway owning a ledger, etcd's
 * client URL) lead to the container from outside it and from inside it, where
 * the gateway reaches the bookies at them (docs/decisions.md). Several
 * containers and local clusters can run side by side. `hostNetwork: true`
 * shares the host's network instead, for an engine on this machine that has
 * no bridge network (dockerd --bridge=none); nothing else needs it.
 * start() returns once the registry and gateway report SERVING on gRPC
 * health; a container that exits or does not get there in time fails with
 * its last log lines. Nothing here changes the process's environment.
 *
 * `testcontainers` is an optional peer dependency: install it beside
 * @quire-ledger/client to use this module.
 */
import { readFile } from "node:fs/promises";
import * as net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { credentials, makeGenericClientConstructor, type ServiceError } from "@grpc/grpc-js";
import type { StartedTestContainer } from "testcontainers";

export const DEFAULT_IMAGE = "quire:latest";
const LOG_LINES_ON_FAILURE = 60;

export class QuireContainerError extends Error {}

export interface QuireContainerOptions {
  bookies?: number;
  /** Share the host's network: only for a local engine with no bridge network (default false). */
  hostNetwork?: boolean;
  startupTimeoutMs?: number;
  stopTimeoutMs?: number;
  /** More environment for the services, e.g. QUIRE_BOOKIE_MAX_ENTRY_BYTES. */
  env?: Record<string, string>;
}

interface Ports {
  gateway: number;
  registry: number;
  placement: number;
  etcd: number;
  etcdPeer: number;
  gatewayHttp: number;
  registryHttp: number;
  placementHttp: number;
  bookies: number[];
  bookieHttp: number[];
}

// The first port of the kernel's range for outgoing connections. Ports are
// chosen below it: a port taken with listen(0) comes from that range, and an
// outgoing connection could take it between the choice here and the engine
// publishing it. Elsewhere than Linux, the IANA range's start.
async function ephemeralRangeStart(): Promise<number> {
  try {
    const range = await readFile("/proc/sys/net/ipv4/ip_local_port_range", "utf8");
    return Number(range.trim().split(/\s+/)[0]);
  } catch {
    return 49152;
  }
}

async function listenOn(port: number): Promise<net.Server | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

// Every port is held open until all are chosen, so no two services are given
// the same number (a port closed at once may be chosen again: CI once saw a
// bookie and placement's admin HTTP handed one port).
async function freePorts(bookies: number): Promise<Ports> {
  const low = await ephemeralRangeStart();
  const floor = low > 12000 ? 10000 : 1024;
  const held: net.Server[] = [];
  const take = async (n: number) => {
    const ports: number[] = [];
    for (let attempt = 0; ports.length < n; attempt++) {
      if (attempt > 1000) throw new QuireContainerError(`no free loopback port between ${floor} and ${low}`);
      const server = await listenOn(floor + Math.floor(Math.random() * (low - floor)));
      if (server === undefined) continue;
      held.push(server);
      ports.push((server.address() as net.AddressInfo).port);
    }
    return ports;
  };
  try {
    const [gateway, registry, placement, etcd, etcdPeer, gatewayHttp, registryHttp, placementHttp] = await take(8);
    return {
      gateway, registry, placement, etcd, etcdPeer, gatewayHttp, registryHttp, placementHttp,
      bookies: await take(bookies),
      bookieHttp: await take(bookies),
    };
  } finally {
    await Promise.all(held.map((server) => new Promise((closed) => server.close(closed))));
  }
}

// grpc.health.v1.Health/Check with hand-encoded messages: the request is
// empty (the server's overall health) and the answer's field 1 is the status.
const SERVING = 1;
const HealthClient = makeGenericClientConstructor(
  {
    Check: {
      path: "/grpc.health.v1.Health/Check",
      requestStream: false,
      responseStream: false,
      requestSerialize: () => Buffer.alloc(0),
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => (b.length >= 2 && b[0] === 0x08 ? b[1] : 0),
    },
  },
  "Health",
);

async function serving(target: string): Promise<boolean> {
  const client = new HealthClient(target, credentials.createInsecure());
  try {
    return await new Promise<boolean>((resolve) => {
      (client as unknown as Record<string, Function>).Check(
        Buffer.alloc(0),
        { deadline: Date.now() + 2000 },
        (error: ServiceError | null, status: number) => resolve(!error && status === SERVING),
      );
    });
  } finally {
    client.close();
  }
}

export class QuireContainer {
  readonly image: string;
  readonly bookies: number;
  readonly hostNetwork: boolean;
  readonly startupTimeoutMs: number;
  readonly stopTimeoutMs: number;
  private readonly env: Record<string, string>;
  private ports?: Ports;
  private started?: StartedTestContainer;
  /** The host the services advertise (known once start() has begun). */
  advertisedHost?: string;

  constructor(image: string = DEFAULT_IMAGE, options: QuireContainerOptions = {}) {
    const bookies = options.bookies ?? 3;
    if (!Number.isInteger(bookies) || bookies < 1 || bookies > 32) {
      throw new RangeError(`bookies must be between 1 and 32, not ${bookies}`);
    }
    this.image = image;
    this.bookies = bookies;
    this.hostNetwork = options.hostNetwork ?? false;
    this.startupTimeoutMs = options.startupTimeoutMs ?? 120_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 20_000;
    this.env = { ...(options.env ?? {}) };
  }

  async start(): Promise<this> {
    const { GenericContainer, Wait, getContainerRuntimeClient } = await import("testcontainers");
    // Readiness is decided below, on gRPC health, reporting a container that
    // exits with its logs. testcontainers' default wait (each published port,
    // checked from inside the container) would fail such a container first,
    // with a bare "container is not running", so none of its own: an empty forAll.
    let container = new GenericContainer(this.image).withCommand(["standalone"]).withWaitStrategy(Wait.forAll([]));
    const ports = (this.ports = await freePorts(this.bookies));
    let bindHost: string;
    let advertisedHost: string;
    if (this.hostNetwork) {
      // An engine with no bridge network: the services share the host's loopback.
      container = container.withNetworkMode("host");
      bindHost = advertisedHost = "127.0.0.1";
    } else {
      // Same number inside and out: an address a service advertises is then
      // right on both sides of the published port.
      const published = [
        ports.etcd, ports.gateway, ports.registry, ports.placement,
        ports.gatewayHttp, ports.registryHttp, ports.placementHttp, ...ports.bookies, ...ports.bookieHttp,
      ];
      container = container.withExposedPorts(...published.map((port) => ({ container: port, host: port })));
      bindHost = "0.0.0.0";
      advertisedHost = (await getContainerRuntimeClient()).info.containerRuntime.host;
      if (isHostName(advertisedHost)) {
        // A name the engine's host answers to (tcp://docker:2375 of a
        // docker:dind service): inside the container it must lead to that
        // host too, where the ports are published.
        container = container.withExtraHosts([{ host: advertisedHost, ipAddress: "host-gateway" }]);
      }
    }
    this.advertisedHost = advertisedHost;
    const env: Record<string, string> = {
      QUIRE_STANDALONE_BIND_HOST: bindHost,
      QUIRE_STANDALONE_ADVERTISED_HOST: advertisedHost,
      QUIRE_STANDALONE_BOOKIES: String(this.bookies),
      QUIRE_STANDALONE_BOOKIE_PORTS: ports.bookies.join(","),
      QUIRE_STANDALONE_BOOKIE_HTTP_PORTS: ports.bookieHttp.join(","),
      QUIRE_STANDALONE_GATEWAY_PORT: String(ports.gateway),
      QUIRE_STANDALONE_REGISTRY_PORT: String(ports.registry),
      QUIRE_STANDALONE_PLACEMENT_PORT: String(ports.placement),
      QUIRE_STANDALONE_ETCD_PORT: String(ports.etcd),
      QUIRE_STANDALONE_ETCD_PEER_PORT: String(ports.etcdPeer),
      QUIRE_STANDALONE_GATEWAY_HTTP_PORT: String(ports.gatewayHttp),
      QUIRE_STANDALONE_REGISTRY_HTTP_PORT: String(ports.registryHttp),
      QUIRE_STANDALONE_PLACEMENT_HTTP_PORT: String(ports.placementHttp),
      QUIRE_STANDALONE_START_TIMEOUT_SECONDS: String(Math.max(1, Math.ceil(this.startupTimeoutMs / 1000))),
      ...this.env,
    };
    try {
      this.started = await container.withEnvironment(env).start();
    } catch (error) {
      throw new QuireContainerError(`Quire container ${this.image} did not start: ${(error as Error).message}`);
    }
    try {
      await this.waitUntilServing();
    } catch (error) {
      const logs = await this.recentLogs();
      await this.stop();
      throw new QuireContainerError(`Quire container ${this.image}: ${(error as Error).message}\n${logs}`);
    }
    return this;
  }

  private async waitUntilServing(): Promise<void> {
    const deadline = Date.now() + this.startupTimeoutMs;
    const targets = [this.getRegistryTarget(), this.getGatewayTarget()];
    for (;;) {
      const states = await Promise.all(targets.map(serving));
      if (states.every(Boolean)) return;
      const exited = await this.exitReason();
      if (exited) throw new Error(exited);
      if (Date.now() > deadline) {
        throw new Error(`not SERVING within ${this.startupTimeoutMs / 1000}s: ${targets.filter((_, i) => !states[i]).join(", ")}`);
      }
      await sleep(250);
    }
  }

  private async exitReason(): Promise<string | undefined> {
    if (!this.started) return undefined;
    const { getContainerRuntimeClient } = await import("testcontainers");
    const client = await getContainerRuntimeClient();
    const info = await client.container.inspect(client.container.getById(this.started.getId()));
    if (info.State.Status === "exited" || info.State.Status === "dead") {
      return `the container exited with status ${info.State.ExitCode}`;
    }
    return undefined;
  }

  /** The container's last log lines, for error messages. */
  async recentLogs(lines: number = LOG_LINES_ON_FAILURE): Promise<string> {
    if (!this.started) return "(no container)";
    try {
      const stream = await this.started.logs({ tail: lines });
      const chunks: Buffer[] = [];
      await new Promise<void>((resolve) => {
        // A log stream may close without `end`; the timer (kept referenced,
        // so the process waits for it) bounds a stream that does neither.
        const timer = setTimeout(done, 5000);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        stream.on("data", (chunk: Buffer | string) => chunks.push(Buffer.from(chunk)));
        for (const event of ["end", "close", "error"]) stream.on(event, done);
      });
      return `--- last ${lines} lines of the container's log ---\n${Buffer.concat(chunks).toString()}`.trimEnd();
    } catch (error) {
      return `(container logs unavailable: ${(error as Error).message})`;
    }
  }

  /** Stops (SIGTERM first, so the services drain and close cleanly) and removes the container. */
  async stop(): Promise<void> {
    const started = this.started;
    this.started = undefined;
    if (started) await started.stop({ timeout: this.stopTimeoutMs, remove: true, removeVolumes: true });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  getGatewayTarget(): string {
    return this.target("gateway");
  }

  getRegistryTarget(): string {
    return this.target("registry");
  }

  getPlacementTarget(): string {
    return this.target("placement");
  }

  getEtcdEndpoint(): string {
    return this.target("etcd");
  }

  getBookieCount(): number {
    return this.bookies;
  }

  /** The Docker container's id. */
  getId(): string {
    if (!this.started) throw new Error("the container is not started");
    return this.started.getId();
  }

  private target(service: "gateway" | "registry" | "placement" | "etcd"): string {
    if (!this.ports || !this.started) throw new Error("the container is not started");
    if (this.hostNetwork) return `127.0.0.1:${this.ports[service]}`;
    return `${this.started.getHost()}:${this.started.getMappedPort(this.ports[service])}`;
  }
}

/** A DNS name other than localhost (which every container resolves to itself), not an IP address. */
function isHostName(host: string): boolean {
  return host !== "localhost" && net.isIP(host) === 0;
}
