#!/usr/bin/env node
// Secrets at scale: a fleet repository of 1,000 secret files (age, armored, each with its recipient
// manifest) placed on 10 nodes, every file encrypted for the 10 nodes' recipients.
// - validate_1k_secrets_ms: `steward validate` as a process (stanzas and manifests, no decryption);
// - agent_first_apply_1k_secrets_ms: `steward agent apply` as a process, one host decrypting and
//   writing the 1,000 files into an empty root (its identity imported once, as a CryptoKey). The host
//   is node-4, whose stanza is the fifth of ten: age tries the stanzas in order, so a host in the
//   middle does what a typical one does, not the best case;
// - agent_noop_1k_secrets_ms: the same bundle again as a new attempt (no decryption: the ciphertext
//   and the files are unchanged since the last apply).
// Prints the median of several runs (BENCH_RUNS, default 5) as `figure` lines. Targets: validate
// < 1,000 ms, first apply < 2,500 ms, no-op < 500 ms. Run `npm run build` first (done here if missing).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "bin/steward.js");
if (!existsSync(join(root, "dist/cli/main.js")))
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });

const { armor, Encrypter, generateX25519Identity, identityToRecipient } = await import("age-encryption");
const { formatManifest } = await import(join(root, "dist/model/secrets.js"));
const { directorySource, loadRepo } = await import(join(root, "dist/model/load.js"));
const { bundleFor } = await import(join(root, "dist/model/render.js"));

const SECRETS = 1000;
const NODES = 10;
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

/** Runs `work` over `items`, `limit` at once. */
async function limited(items, limit, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

const dir = mkdtempSync(join(tmpdir(), "steward-bench-secrets-"));
try {
  const repo = join(dir, "repo");
  for (const sub of ["nodes", "assignments", "secrets"]) mkdirSync(join(repo, sub), { recursive: true });
  const nodes = [];
  for (let n = 0; n < NODES; n++) {
    const identity = await generateX25519Identity();
    const node = { name: `node-${n}`, identity, recipient: await identityToRecipient(identity) };
    nodes.push(node);
    writeFileSync(
      join(repo, "nodes", `${node.name}.yaml`),
      `apiVersion: steward.dev/v1\nkind: Node\nmetadata:\n  name: ${node.name}\n  labels: { tier: db }\nspec:\n  transport: local\n  roots: [/etc/bench]\n  identity:\n    age: ${node.recipient}\n`,
    );
  }
  const resources = [];
  for (let i = 0; i < SECRETS; i++)
    resources.push(
      `    - kind: file\n      path: /etc/bench/d${i % 10}/secret-${i}.key\n      mode: "0600"\n      source: secrets/s${i}.age\n      secret: true\n`,
    );
  writeFileSync(
    join(repo, "assignments", "secrets.yaml"),
    `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: secrets\nspec:\n  selector:\n    matchLabels: { tier: db }\n  resources:\n${resources.join("")}`,
  );
  const encrypter = new Encrypter();
  for (const node of nodes) encrypter.addRecipient(node.recipient);
  const manifest = nodes.map((node) => ({ recipient: node.recipient, role: "node", name: node.name }));
  await limited(
    Array.from({ length: SECRETS }, (_, i) => i),
    32,
    async (i) => {
      const plaintext = `-----BEGIN PRIVATE KEY-----\nsecret ${i} ${"k".repeat(120)}\n-----END PRIVATE KEY-----\n`;
      writeFileSync(join(repo, "secrets", `s${i}.age`), armor.encode(await encrypter.encrypt(plaintext)));
      writeFileSync(
        join(repo, "secrets", `s${i}.age.recipients`),
        formatManifest(`secrets/s${i}.age`, manifest),
      );
    },
  );

  const validate = () => {
    const started = process.hrtime.bigint();
    const run = spawnSync(process.execPath, [bin, "validate", repo], { encoding: "utf8" });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (run.status !== 0)
      throw new Error(`steward validate exited ${run.status}: ${run.stdout}${run.stderr}`);
    return ms;
  };

  // The bundle node-4's agent gets, rendered from the repository as the hub renders it.
  const loaded = await loadRepo(directorySource(repo));
  if (!loaded.ok)
    throw new Error(`the bench repository is invalid: ${JSON.stringify(loaded.diagnostics.slice(0, 3))}`);
  const host = nodes[4];
  const instance = loaded.desired.instances.get(`secrets@${host.name}`);
  const bundleFile = (id) => {
    const file = join(dir, `${id}.json`);
    writeFileSync(file, JSON.stringify(bundleFor(instance, 1, id, new Date())));
    return file;
  };

  const apply = (work, file, expect) => {
    const started = process.hrtime.bigint();
    const run = spawnSync(
      process.execPath,
      [
        bin,
        "--state",
        join(work, "state"),
        "agent",
        "apply",
        "--bundle",
        file,
        "--root",
        join(work, "root"),
        "--json",
      ],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (run.status !== 0)
      throw new Error(`agent apply exited ${run.status}: ${run.stderr}${run.stdout.slice(0, 2000)}`);
    const { result } = JSON.parse(run.stdout);
    const actions = result.resources.filter((r) => r.action === expect).length;
    if (actions !== SECRETS) throw new Error(`expected ${SECRETS} ${expect}, got ${actions}`);
    return ms;
  };

  validate();
  const validations = [];
  for (let run = 0; run < RUNS; run++) validations.push(validate());
  const first = [];
  const noop = [];
  for (let run = 0; run < RUNS; run++) {
    const work = mkdtempSync(join(tmpdir(), "steward-bench-secrets-host-"));
    try {
      // The host's identity, where `steward agent identity` keeps it.
      mkdirSync(join(work, "state", "identity"), { recursive: true, mode: 0o700 });
      writeFileSync(join(work, "state", "identity", "age.key"), `${host.identity}\n`, { mode: 0o600 });
      first.push(apply(work, bundleFile(`01BENCHSECRETFIRST${run}`), "created"));
      noop.push(apply(work, bundleFile(`01BENCHSECRETAGAIN${run}`), "unchanged"));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const list = (values) => values.map((v) => v.toFixed(0)).join(" ");
  console.log(
    `# ${RUNS} runs each; validate ${list(validations)} ms; first apply ${list(first)} ms; no-op ${list(noop)} ms`,
  );
  console.log(`figure validate_1k_secrets_ms ${median(validations).toFixed(0)} ms`);
  console.log(`figure agent_first_apply_1k_secrets_ms ${median(first).toFixed(0)} ms`);
  console.log(`figure agent_noop_1k_secrets_ms ${median(noop).toFixed(0)} ms`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
