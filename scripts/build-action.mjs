#!/usr/bin/env node
// Bundles the GitHub Action (src/action/index.ts and everything it imports) into one file,
// action/dist/index.mjs, which action.yml runs with the runner's own Node: nothing is installed or
// compiled when the Action runs. The bundle is committed (GitHub runs an action from its repository
// as it is); `node scripts/build-action.mjs --check` exits 1 when it is stale, and a test runs it.
// `--metafile FILE` writes esbuild's input graph, which a test reads to prove that no native module
// (better-sqlite3, ssh2) is in the bundle.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "action/dist/index.mjs");

const result = await build({
  absWorkingDir: root,
  entryPoints: ["src/action/index.ts"],
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  // Paths in the bundle are relative to the repository as checked out, even where node_modules is a
  // symbolic link (a git worktree sharing one), so every checkout builds the same bytes.
  preserveSymlinks: true,
  // Whitespace and syntax only: names stay readable in a stack trace.
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "eof",
  charset: "utf8",
  metafile: true,
  write: false,
  logLevel: "warning",
  // Bundled CommonJS packages call require() for Node's own modules.
  banner: {
    js: 'import { createRequire as __stewardRequire } from "node:module"; const require = __stewardRequire(import.meta.url);',
  },
});
const text = `${result.outputFiles[0].text}`;

const metafileAt = process.argv.indexOf("--metafile");
if (metafileAt > 0) writeFileSync(process.argv[metafileAt + 1], JSON.stringify(result.metafile));

if (process.argv.includes("--check")) {
  let committed = "";
  try {
    committed = readFileSync(out, "utf8");
  } catch {
    // Missing counts as stale.
  }
  if (committed !== text) {
    console.error(`${out} is stale: run \`npm run build:action\` and commit it`);
    process.exit(1);
  }
} else {
  mkdirSync(dirname(out), { recursive: true });
  // Written aside and renamed, so an interrupted build never leaves half a bundle.
  writeFileSync(`${out}.tmp`, text);
  renameSync(`${out}.tmp`, out);
  console.log(`${out}: ${(Buffer.byteLength(text) / 1024).toFixed(0)} KiB`);
}
