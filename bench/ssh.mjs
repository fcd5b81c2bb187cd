#!/usr/bin/env node
// npm run bench:ssh — the SSH transport's fan-out. 20 real OpenSSH sshd instances on loopback ports,
// each with its own root; a fleet repo of 20 ssh Nodes and one assignment placed on all of them. The
// first commit is applied once (the agent is uploaded to every host: reported, not the figure); then
// each measured commit changes every instance, and the clock runs from the first dispatch until every
// host's reply shows the new generation converged.
//
// Prints `figure ssh_fanout_20_hosts_ms <median of 3 commits> ms`, and
// `figure ansible_fanout_20_hosts_ms <v> ms` when ansible-playbook is installed (same files, same hosts).
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const HOSTS = Number(process.env.BENCH_SSH_HOSTS ?? 20);
const COMMITS = 3;
const CONCURRENCY = Number(process.env.BENCH_SSH_CONCURRENCY ?? 16);

// A fresh single-file agent, then the TypeScript pieces (sshd harness, transport, model) as one module.
execFileSync(process.execPath, [join(root, "scripts/build-agent.mjs")], { cwd: root, stdio: "inherit" });
const libFile = join(root, "dist/bench/ssh-lib.mjs");
await build({
  stdin: {
    contents: [
      'export { startSshdFleet } from "./test/helpers/sshd.ts";',
      'export { createSshTransport } from "./src/transport/ssh/index.ts";',
      'export { loadRepo, directorySource } from "./src/model/load.ts";',
      'export { bundleFor } from "./src/model/render.ts";',
    ].join("\n"),
    resolveDir: root,
    loader: "ts",
  },
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  outfile: libFile,
  logLevel: "warning",
});
const lib = await import(pathToFileURL(libFile).href);
const { ulid } = await import("ulid");

/** The fleet repo at commit `n`: every file's content changes with `n`. */
function writeRepo(dir, servers, n) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, "nodes"), { recursive: true });
  mkdirSync(join(dir, "assignments"), { recursive: true });
  mkdirSync(join(dir, "files"), { recursive: true });
  writeFileSync(
    join(dir, "steward.yaml"),
    "apiVersion: steward.dev/v1\nkind: Fleet\nmetadata:\n  name: bench\nspec:\n  mode: apply\n",
  );
  servers.forEach((server, i) => {
    writeFileSync(
      join(dir, "nodes", `host-${i}.yaml`),
      [
        "apiVersion: steward.dev/v1",
        "kind: Node",
        "metadata:",
        `  name: host-${i}`,
        "  labels: { role: bench }",
        "spec:",
        "  transport: ssh",
        "  ssh:",
        `    host: ${server.host}`,
        `    port: ${server.port}`,
        `    user: ${server.user}`,
        `    hostKey: ${server.hostKey.publicKey}`,
        `  roots: [${server.root}/managed]`,
        // Paths in assignments must be absolute as written: the variable holds the rest of this host's root.
        "  vars:",
        `    root: ${server.root.slice(1)}/managed`,
        "",
      ].join("\n"),
    );
  });
  writeFileSync(join(dir, "files", "app.conf"), `# commit ${n}\nlisten = 8080\nworkers = ${n}\n`);
  writeFileSync(
    join(dir, "assignments", "app.yaml"),
    [
      "apiVersion: steward.dev/v1",
      "kind: Assignment",
      "metadata:",
      "  name: app",
      "spec:",
      "  selector: { matchLabels: { role: bench } }",
      "  resources:",
      "    - kind: directory",
      `      path: /\${node.vars.root}/etc/app`,
      "    - kind: file",
      `      path: /\${node.vars.root}/etc/app/app.conf`,
      "      source: files/app.conf",
      "    - kind: file",
      `      path: /\${node.vars.root}/etc/app/release`,
      `      content: "release ${n} for \${node.name}\\n"`,
      "",
    ].join("\n"),
  );
}

async function desiredAt(repoDir) {
  const loaded = await lib.loadRepo(lib.directorySource(repoDir));
  if (!loaded.ok) throw new Error(`bench repo invalid: ${JSON.stringify(loaded.diagnostics.slice(0, 3))}`);
  return loaded.desired;
}

/** Dispatches generation `generation` to every node and resolves with the ms until all converged. */
async function fanOut(transport, waiters, desired, generation) {
  const started = performance.now();
  const settled = [];
  for (const instance of desired.instances.values()) {
    const node = desired.nodes.get(instance.node).value;
    const bundle = lib.bundleFor(instance, generation, ulid(), new Date());
    settled.push(
      new Promise((resolve, reject) => {
        waiters.set(instance.node, { generation, resolve, reject });
        transport.dispatch(bundle, node).catch(reject);
      }),
    );
  }
  await Promise.all(settled);
  return performance.now() - started;
}

const fleet = await lib.startSshdFleet(HOSTS);
const repoDir = mkdtempSync(join(tmpdir(), "steward-bench-ssh-repo-"));
const waiters = new Map();
const transport = lib.createSshTransport({
  keyFile: fleet.clientKey.privateKeyFile,
  agentSocket: null,
  concurrency: CONCURRENCY,
});
await transport.start({
  result(result) {
    const waiter = waiters.get(result.node);
    if (waiter && result.outcome !== "succeeded")
      waiter.reject(new Error(`${result.node}: ${result.reason}: ${result.message}`));
  },
  report(report) {
    const waiter = waiters.get(report.node);
    const instance = report.instances.find((i) => i.assignment === "app");
    if (waiter && instance?.generation === waiter.generation && instance.converged) {
      waiters.delete(report.node);
      waiter.resolve();
    }
  },
  heartbeat() {},
  lost(attemptId, node, reason) {
    waiters.get(node)?.reject(new Error(`lost ${attemptId} on ${node}: ${reason}`));
  },
  health(event) {
    if (event.status === "degraded") console.error(`degraded ${event.node}: ${event.message}`);
  },
});

try {
  writeRepo(repoDir, fleet.servers, 1);
  const first = await fanOut(transport, waiters, await desiredAt(repoDir), 1);
  console.log(
    `first contact (agent uploaded to ${HOSTS} hosts, generation 1 applied): ${first.toFixed(0)} ms`,
  );
  const times = [];
  for (let commit = 2; commit < 2 + COMMITS; commit++) {
    writeRepo(repoDir, fleet.servers, commit);
    const ms = await fanOut(transport, waiters, await desiredAt(repoDir), commit);
    times.push(ms);
    console.log(
      `commit ${commit}: ${HOSTS} hosts converged in ${ms.toFixed(0)} ms (concurrency ${CONCURRENCY})`,
    );
  }
  times.sort((a, b) => a - b);
  // Every host is a process on this machine: its load is part of the figure.
  console.log(
    `load average ${loadavg()
      .map((v) => v.toFixed(2))
      .join(" ")} on ${cpus().length} cores`,
  );
  console.log(`figure ssh_fanout_${HOSTS}_hosts_ms ${times[Math.floor(times.length / 2)].toFixed(0)} ms`);

  const ansible = spawnSync("ansible-playbook", ["--version"], { encoding: "utf8" });
  if (ansible.error) {
    console.log("ansible-playbook is not installed: ansible_fanout_20_hosts_ms not measured");
  } else {
    const dir = mkdtempSync(join(tmpdir(), "steward-bench-ansible-"));
    writeFileSync(join(dir, "known_hosts"), fleet.knownHosts);
    writeFileSync(
      join(dir, "inventory.ini"),
      `[bench]\n${fleet.servers
        .map(
          (s, i) =>
            `host-${i} ansible_host=${s.host} ansible_port=${s.port} ansible_user=${s.user} root=${s.root}/managed`,
        )
        .join("\n")}\n`,
    );
    writeFileSync(
      join(dir, "playbook.yml"),
      [
        "- hosts: bench",
        "  gather_facts: false",
        "  tasks:",
        "    - file: { path: '{{ root }}/etc/app', state: directory }",
        `    - copy: { src: '${join(repoDir, "files", "app.conf")}', dest: '{{ root }}/etc/app/app.conf' }`,
        "    - copy: { content: \"release ansible for {{ inventory_hostname }}\\n\", dest: '{{ root }}/etc/app/release' }",
        "",
      ].join("\n"),
    );
    const env = {
      ...process.env,
      ANSIBLE_HOST_KEY_CHECKING: "True",
      ANSIBLE_SSH_ARGS: `-o UserKnownHostsFile=${join(dir, "known_hosts")} -o ControlMaster=no`,
      ANSIBLE_PRIVATE_KEY_FILE: fleet.clientKey.privateKeyFile,
      ANSIBLE_FORKS: String(CONCURRENCY),
    };
    const started = performance.now();
    const run = spawnSync("ansible-playbook", ["-i", join(dir, "inventory.ini"), join(dir, "playbook.yml")], {
      env,
      encoding: "utf8",
    });
    const ms = performance.now() - started;
    if (run.status !== 0)
      console.log(`ansible-playbook failed (exit ${run.status}):\n${run.stdout}\n${run.stderr}`);
    else console.log(`figure ansible_fanout_${HOSTS}_hosts_ms ${ms.toFixed(0)} ms`);
    rmSync(dir, { recursive: true, force: true });
  }
} finally {
  await transport.stop();
  await fleet.stop();
  rmSync(repoDir, { recursive: true, force: true });
}
