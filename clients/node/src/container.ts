/**
 * QuireContainer: the all-in-one image (`quire:latest`, its `standalone`
 * mode: etcd, registry, placement, N bookies and the gateway in one
 * container) under the npm `testcontainers` package, like the Python
 * client's quire_client.testing.QuireContainer.
 *
 * On Linux the container shares the host's network and every service gets a
 * free host port chosen here, so several containers and local clusters can
 * run side by side; elsewhere (Docker Desktop) the default ports are
 * published. start() returns once the registry and gateway report SERVING
 * on gRPC health; a container that exits or does not get there in time
 * fails with its last log lines.
 *
 * `testcontainers` is an optional peer dependency: install it beside
 * @quire/client to use this module.
 */
import * as net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { credentials, makeGenericClientConstructor, type ServiceError } from "@grpc/grpc-js";
import type { StartedTestContainer } from "testcontainers";

export const DEFAULT_IMAGE = "quire:latest";
const LOG_LINES_ON_FAILURE = 60;
const DEFAULT_PORTS = { gateway: 7000, registry: 7001, placement: 7002, etcd: 2379 };

export class QuireContainerError extends Error {}

export interface QuireContainerOptions {
  bookies?: number;
  /** Share the host's network (default: on Linux). */
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

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function freePorts(bookies: number): Promise<Ports> {
  const take = async (n: number) => {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) ports.push(await freePort());
    return ports;
  };
  const [gateway, registry, placement, etcd, etcdPeer, gatewayHttp, registryHttp, placementHttp] = await take(8);
  return {
    gateway, registry, placement, etcd, etcdPeer, gatewayHttp, registryHttp, placementHttp,
    bookies: await take(bookies),
    bookieHttp: await take(bookies),
  };
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

  constructor(image: string = DEFAULT_IMAGE, options: QuireContainerOptions = {}) {
    const bookies = options.bookies ?? 3;
    if (!Number.isInteger(bookies) || bookies < 1 || bookies > 32) {
      throw new RangeError(`bookies must be between 1 and 32, not ${bookies}`);
    }
    this.image = image;
    this.bookies = bookies;
    this.hostNetwork = options.hostNetwork ?? process.platform === "linux";
    this.startupTimeoutMs = options.startupTimeoutMs ?? 120_000;
    this.stopTimeoutMs = options.stopTimeoutMs ?? 20_000;
    this.env = { ...(options.env ?? {}) };
  }

  async start(): Promise<this> {
    if (this.hostNetwork) {
      // The services are on loopback. Without an override, testcontainers
      // running inside a container looks the host up on the engine's bridge
      // network, which a host-network-only engine does not have.
      process.env.TESTCONTAINERS_HOST_OVERRIDE ??= "127.0.0.1";
    }
    const { GenericContainer } = await import("testcontainers");
    let container = new GenericContainer(this.image).withCommand(["standalone"]);
    let bookiePorts: number[];
    let bookieHttpPorts: number[];
    const env: Record<string, string> = {};
    if (this.hostNetwork) {
      this.ports = await freePorts(this.bookies);
      bookiePorts = this.ports.bookies;
      bookieHttpPorts = this.ports.bookieHttp;
      container = container.withNetworkMode("host");
      env.QUIRE_STANDALONE_BIND_HOST = "127.0.0.1";
    } else {
      const range = (base: number) => Array.from({ length: this.bookies }, (_, i) => base + i);
      this.ports = {
        ...DEFAULT_PORTS, etcdPeer: 2380, gatewayHttp: 8000, registryHttp: 8001, placementHttp: 8002,
        bookies: range(3181), bookieHttp: range(8181),
      };
      bookiePorts = this.ports.bookies;
      bookieHttpPorts = this.ports.bookieHttp;
      container = container.withExposedPorts(...Object.values(DEFAULT_PORTS));
      env.QUIRE_STANDALONE_BIND_HOST = "0.0.0.0";
    }
    const ports = this.ports;
    Object.assign(env, {
      QUIRE_STANDALONE_BOOKIES: String(this.bookies),
      QUIRE_STANDALONE_BOOKIE_PORTS: bookiePorts.join(","),
      QUIRE_STANDALONE_BOOKIE_HTTP_PORTS: bookieHttpPorts.join(","),
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
    });
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

  private target(service: keyof typeof DEFAULT_PORTS): string {
    if (!this.ports || !this.started) throw new Error("the container is not started");
    if (this.hostNetwork) return `127.0.0.1:${this.ports[service]}`;
    return `${this.started.getHost()}:${this.started.getMappedPort(DEFAULT_PORTS[service])}`;
  }
}
