// Copies the repository's protos (../../protos) into ./protos, where the
// client loads them from at run time. A package built from a published
// tarball already carries them.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const source = path.resolve(__dirname, "..", "..", "..", "protos");
const target = path.resolve(__dirname, "..", "protos");

if (!fs.existsSync(source)) {
  if (fs.existsSync(path.join(target, "quire"))) process.exit(0);
  console.error(`protos not found at ${source}; set them up in ${target} (see README.md)`);
  process.exit(1);
}
fs.rmSync(target, { recursive: true, force: true });
for (const dir of ["quire", "google"]) {
  const from = path.join(source, dir);
  if (fs.existsSync(from)) fs.cpSync(from, path.join(target, dir), { recursive: true, filter: (f) => !f.endsWith(".binpb") });
}
