#!/usr/bin/env node
// Builds the single-file agent the SSH transport uploads to hosts without steward:
// dist/steward-agent.mjs (the `agent` subcommands only, every dependency inlined, plain `node` >= 20,
// no native addon, no file read at run time) and dist/steward-agent.mjs.sha256 (sha256sum format).
// The second line names the version (`// steward-agent X.Y.Z`); the transport puts it, with the
// checksum's prefix, into the remote path, so a changed agent never overwrites a running one.
//
//   node scripts/build-agent.mjs [--entry FILE] [--out FILE]
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Matches MIN_NODE_MAJOR in src/transport/ssh/launch.ts. */
const MIN_NODE_MAJOR = 20;
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

function argument(name, fallback) {
  const index = process.argv.indexOf(name);
  return index > 0 && process.argv[index + 1] ? resolve(process.argv[index + 1]) : fallback;
}

// The agent's CLI entry: runs `steward agent ...` and nothing else, so nothing of the hub (SQLite,
// NATS server config, forges) is pulled in.
const entry = argument("--entry", join(root, "src/cli/agent-main.ts"));
const outfile = argument("--out", join(root, "dist/steward-agent.mjs"));

if (!existsSync(entry)) {
  console.error(
    `build:agent: the agent entry ${relative(root, entry)} does not exist — it lands with the agent CLI`,
  );
  process.exit(2);
}

/** src/cli/version.ts reads package.json beside the code; on a host there is none, so the version is baked in. */
const bakeVersion = {
  name: "bake-version",
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/]cli[\\/]version\.ts$/ }, () => ({
      contents: `export const VERSION: string = ${JSON.stringify(pkg.version)};\n`,
      loader: "ts",
    }));
  },
};

/** A native addon cannot be inlined: fail the build, naming who imports it. */
const refuseNative = {
  name: "refuse-native",
  setup(b) {
    b.onResolve({ filter: /^(better-sqlite3|cpu-features|bufferutil|utf-8-validate)$|\.node$/ }, (args) => ({
      errors: [
        {
          text: `${args.path} is a native addon, imported by ${relative(root, args.importer)}; the single-file agent must run with plain node — keep it out of the agent's imports`,
        },
      ],
    }));
  },
};

/**
 * The hub (its store, reconciler, transports' hub side) has no business on a host: an import of
 * src/hub/ fails the build, naming who imports it. (`import type` is erased before bundling.)
 */
const hubDirectory = join(root, "src", "hub");
const refuseHub = {
  name: "refuse-hub",
  setup(b) {
    b.onResolve({ filter: /^\.|^\// }, (args) => {
      const target = resolve(args.resolveDir, args.path);
      if (target !== hubDirectory && !target.startsWith(`${hubDirectory}/`)) return undefined;
      return {
        errors: [
          {
            text: `${relative(root, target)} is the hub's code, imported by ${relative(root, args.importer)}; the single-file agent runs on hosts without the hub — keep it out of the agent's imports`,
          },
        ],
      };
    });
  },
};

const started = Date.now();
const result = await build({
  entryPoints: [entry],
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  write: false,
  outfile,
  legalComments: "none",
  // Every run on a host compiles the whole file: smaller source starts faster. Names are kept so
  // errors and stack traces still say what failed.
  minify: true,
  keepNames: true,
  logLevel: "warning",
  metafile: true,
  plugins: [bakeVersion, refuseNative, refuseHub],
  // src/agent/version.ts takes the version from this constant when it is defined.
  define: { STEWARD_AGENT_VERSION: JSON.stringify(pkg.version) },
  banner: {
    // Line 2 names the version (the transport reads it). CommonJS dependencies call require(), which
    // an ES module does not have: give them one.
    js: [
      "#!/usr/bin/env node",
      `// steward-agent ${pkg.version} — single-file agent built by scripts/build-agent.mjs; run: node steward-agent.mjs agent --help`,
      'import { createRequire as __stewardCreateRequire } from "node:module";',
      "const require = __stewardCreateRequire(import.meta.url);",
      // Before any agent code: an older node (say, downgraded after the upload) is refused the way the
      // SSH launcher refuses it (status 191, `steward-ssh: old-node`), so nothing runs half-way.
      `if (+process.versions.node.split(".")[0] < ${MIN_NODE_MAJOR}) { process.stderr.write("steward-ssh: old-node node " + process.version + " found at " + process.execPath + " (the agent needs Node.js >= ${MIN_NODE_MAJOR})\\n"); process.exit(191); }`,
    ].join("\n"),
  },
});

const bytes = Buffer.from(result.outputFiles[0].contents);
const sha256 = createHash("sha256").update(bytes).digest("hex");
mkdirSync(dirname(outfile), { recursive: true });
// Write both files beside their final names, then rename: a reader never sees a half-written agent or
// a checksum that belongs to other bytes for longer than between the two renames.
writeFileSync(`${outfile}.tmp`, bytes, { mode: 0o755 });
writeFileSync(`${outfile}.sha256.tmp`, `${sha256}  ${outfile.split("/").pop()}\n`);
renameSync(`${outfile}.tmp`, outfile);
renameSync(`${outfile}.sha256.tmp`, `${outfile}.sha256`);
console.log(
  `build:agent: ${relative(process.cwd(), outfile)} ${(bytes.length / 1024).toFixed(0)} KiB sha256 ${sha256} (${Date.now() - started} ms)`,
);
