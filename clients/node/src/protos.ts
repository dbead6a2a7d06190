/** Loads the Quire protos: 64-bit integers as decimal strings, so ids keep every bit. */
import * as fs from "node:fs";
import * as path from "node:path";
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";

const FILES = ["quire/gateway/v1/ledger.proto", "quire/gateway/v1/blob.proto"];

/** ./protos in the package (copied there at build time), or QUIRE_PROTOS_DIR. */
export function defaultProtosDir(): string {
  const fromEnv = process.env.QUIRE_PROTOS_DIR;
  if (fromEnv) return fromEnv;
  // dist/src/protos.js -> the package root
  return path.resolve(__dirname, "..", "..", "protos");
}

export interface GatewayServices {
  LedgerService: ServiceClientConstructor;
  BlobService: ServiceClientConstructor;
}

const loaded = new Map<string, GatewayServices>();

export function loadGatewayServices(protosDir: string = defaultProtosDir()): GatewayServices {
  const cached = loaded.get(protosDir);
  if (cached) return cached;
  if (!fs.existsSync(path.join(protosDir, FILES[0]))) {
    throw new Error(`Quire protos not found in ${protosDir}: run \`npm run protos\` or set QUIRE_PROTOS_DIR`);
  }
  const definition = loadSync(FILES, {
    includeDirs: [protosDir],
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const root = loadPackageDefinition(definition) as GrpcObject;
  const gateway = ((root.quire as GrpcObject).gateway as GrpcObject).v1 as GrpcObject;
  const services = {
    LedgerService: gateway.LedgerService as ServiceClientConstructor,
    BlobService: gateway.BlobService as ServiceClientConstructor,
  };
  loaded.set(protosDir, services);
  return services;
}
