/**
 * `steward agent install [--dry-run] --nats URL --node NAME [--token-file FILE] [--state DIR]` and
 * `steward agent uninstall [--dry-run]`: the agent as a systemd service (src/agent/install.ts says
 * what is written and why). Install writes the files, makes the host's identity if it has none, and
 * — when systemd runs — enables and (re)starts the unit; uninstall stops and removes the unit and
 * the installed agent and keeps the state (identity, run-once records), and the services the agent
 * supervised keep running, for a later install to adopt.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import { basename, isAbsolute, resolve } from "node:path";
import type { Command } from "commander";
import { EnvironmentError, UsageError } from "../model/errors.js";
import { parseLabels, tlsFlags } from "./agent-config.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface InstallOptions extends OutputOptions {
  nats: string;
  node: string;
  tokenFile?: string;
  labels?: string;
  dryRun?: boolean;
  prefix: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** The single-file agent to install: this very file when it runs, else the one the steward package built. */
async function agentToInstall(): Promise<{ bytes: Buffer; sha256: string; source: string }> {
  const running = process.argv[1];
  if (running && basename(running).endsWith(".mjs") && existsSync(running)) {
    const bytes = readFileSync(running);
    if (/^#!\/usr\/bin\/env node\n\/\/ steward-agent /.test(bytes.subarray(0, 200).toString("utf8")))
      return { bytes, sha256: createHash("sha256").update(bytes).digest("hex"), source: running };
  }
  const { loadAgentArtifact } = await import("../transport/ssh/artifact.js");
  const artifact = loadAgentArtifact();
  return { bytes: artifact.bytes, sha256: artifact.sha256, source: artifact.file };
}

/** Runs `systemctl ARGS`, as a one-line error naming the command when it fails. */
function systemctl(args: string[]): void {
  try {
    execFileSync("systemctl", args, { stdio: ["ignore", "ignore", "pipe"] });
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? "").trim();
    throw new EnvironmentError(
      `systemctl ${args.join(" ")} failed: ${stderr || (error as Error).message} — see \`journalctl -u steward-agent\``,
    );
  }
}

/** Refuses to write the real system's files as another user than root (a prefix or --dry-run is fine). */
function requireRoot(prefix: string, what: string): void {
  if (prefix === "/" && process.getuid?.() !== 0)
    throw new EnvironmentError(
      `steward agent ${what} writes /etc/systemd/system, /etc/steward and /usr/local/lib/steward: run it as root (sudo), or with --dry-run to see what it would do`,
    );
}

/** The `install` and `uninstall` subcommands of `steward agent`. */
export function addInstallCommands(
  agent: Command,
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): void {
  const install = agent
    .command("install")
    .description(
      "run this host's agent as a systemd service: the agent, /etc/steward/agent.json and /etc/systemd/system/steward-agent.service, enabled and started when systemd runs",
    )
    .option("--nats <url>", "the NATS server the agent pulls its attempts from (required)")
    .option("--node <name>", "this node's name (required)")
    .option(
      "--token-file <file>",
      "the shared enrolment credential (credentials/enrol.creds), copied to /etc/steward/enrol.creds: the service asks for this host's credentials itself, and waits until Git admits it",
    )
    .option("--labels <k=v,...>", "with --token-file: the labels to ask for")
    .option("--tls-ca <file>", "CA that signed the NATS server's certificate")
    .option("--tls-cert <file>", "client certificate, when the server verifies clients")
    .option("--tls-key <file>", "the client certificate's key")
    .option("--dry-run", "print every directory and file it would write, and change nothing")
    .option(
      "--prefix <dir>",
      "install under DIR instead of / (an image being built); the files name the paths there",
      "/",
    );
  addOutputOptions(install).action(async (_local: InstallOptions, command: Command) => {
    // The agent command knows --nats, --node, --token-file... too: they arrive as its options.
    const options = command.optsWithGlobals<InstallOptions>();
    const { planInstall, describeInstall, writeInstall, systemdRuns, UNIT_NAME } = await import(
      "../agent/install.js"
    );
    if (!options.nats)
      throw new UsageError("--nats URL is required: the NATS server the agent pulls its attempts from");
    if (!options.node) throw new UsageError("--node NAME is required: the node this host is");
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.node))
      throw new UsageError(
        `--node ${options.node} is not a DNS label: use lower-case letters, digits and "-" (e.g. web-3)`,
      );
    const prefix = resolve(io.cwd, options.prefix);
    let root = command;
    while (root.parent) root = root.parent;
    const explicitState =
      root.getOptionValueSource("state") === "cli" ? resolve(io.cwd, globals().state) : undefined;
    if (explicitState && !isAbsolute(globals().state) && prefix === "/")
      throw new UsageError(
        "--state for an installed agent must be an absolute path (the service does not run here)",
      );
    let token: { source: string; text: string } | undefined;
    if (options.tokenFile) {
      const file = resolve(io.cwd, options.tokenFile);
      const { readNatsCredentials } = await import("../transport/nats/connect.js");
      readNatsCredentials(file, "--token-file");
      token = { source: file, text: readFileSync(file, "utf8") };
    }
    const tls = tlsFlags(options, io.cwd);
    const plan = planInstall({
      nats: options.nats,
      node: options.node,
      prefix,
      nodeBinary: process.execPath,
      agent: await agentToInstall(),
      ...(explicitState ? { state: explicitState } : {}),
      ...(token ? { token } : {}),
      labels: parseLabels(options.labels),
      tls,
    });
    const format = outputFormat(options, globals());
    if (options.dryRun) {
      await printResult(
        io,
        format,
        {
          unitFile: plan.unitFile,
          configFile: plan.configFile,
          stateDir: plan.stateDir,
          execStart: plan.execStart,
          directories: plan.directories,
          files: plan.files.map((f) => ({
            path: f.path,
            mode: f.mode,
            ...(f.summary ? { summary: f.summary } : { content: String(f.content) }),
          })),
        },
        () =>
          `${describeInstall(plan)}${prefix === "/" ? `then: systemctl daemon-reload; systemctl enable ${UNIT_NAME}; systemctl restart ${UNIT_NAME} (when systemd runs)\n` : ""}(dry run: nothing written)\n`,
      );
      exit(EXIT.ok);
      return;
    }
    requireRoot(prefix, "install");
    writeInstall(plan);
    const { ensureHostIdentity } = await import("../agent/identity.js");
    const { identity } = await ensureHostIdentity(plan.stateDir);
    const started = prefix === "/" && systemdRuns();
    if (started) {
      systemctl(["daemon-reload"]);
      systemctl(["enable", UNIT_NAME]);
      systemctl(["restart", UNIT_NAME]);
    }
    await printResult(
      io,
      format,
      {
        unitFile: plan.unitFile,
        configFile: plan.configFile,
        stateDir: plan.stateDir,
        execStart: plan.execStart,
        identity,
        started,
      },
      () =>
        [
          `installed ${plan.unitFile} (node ${options.node}, state ${plan.stateDir}, config ${plan.configFile})`,
          `this host's identity: nkey ${identity.nkey}, age ${identity.age}`,
          started
            ? `enabled and started ${UNIT_NAME}: follow it with \`journalctl -u steward-agent -f\``
            : `systemd does not run here: start the agent with ${plan.execStart.join(" ")}`,
          "",
        ].join("\n"),
    );
    exit(EXIT.ok);
  });

  const uninstall = agent
    .command("uninstall")
    .description(
      "stop and remove the agent's service and the installed agent; keep its state (identity, run-once records) and the services it supervised",
    )
    .option("--dry-run", "print what it would remove, and change nothing")
    .option("--prefix <dir>", "the --prefix it was installed under", "/");
  addOutputOptions(uninstall).action(async (_local: unknown, command: Command) => {
    const options = command.optsWithGlobals<OutputOptions & { dryRun?: boolean; prefix: string }>();
    const { installPaths, systemdRuns, UNIT_NAME } = await import("../agent/install.js");
    const prefix = resolve(io.cwd, options.prefix);
    const paths = installPaths(prefix);
    let state = paths.stateDir;
    try {
      state = (JSON.parse(readFileSync(paths.configFile, "utf8")) as { state?: string }).state ?? state;
    } catch {
      // No configuration left: the default state directory is what there is to keep.
    }
    const remove = [
      paths.unitFile,
      paths.agentFile,
      `${paths.agentFile}.sha256`,
      paths.configFile,
      paths.tokenFile,
    ].filter((path) => existsSync(path));
    const stop = prefix === "/" && systemdRuns();
    if (!options.dryRun) {
      requireRoot(prefix, "uninstall");
      if (stop && existsSync(paths.unitFile)) systemctl(["disable", "--now", UNIT_NAME]);
      for (const path of remove) rmSync(path, { force: true });
      for (const dir of [paths.libDir, paths.configDir])
        try {
          rmdirSync(dir);
        } catch {
          // Not empty (files of a person's own) or gone: left as it is.
        }
      if (stop) systemctl(["daemon-reload"]);
    }
    await printResult(
      io,
      outputFormat(options, globals()),
      { removed: remove, kept: state, dryRun: options.dryRun === true },
      () =>
        [
          ...(remove.length === 0 ? ["nothing to remove: the agent is not installed here"] : []),
          ...remove.map((path) => `${options.dryRun ? "would remove" : "removed"} ${path}`),
          `kept ${state} (this host's identity and run-once records; a later install uses them)`,
          "the services the agent supervised keep running; a later install adopts them",
          ...(options.dryRun ? ["(dry run: nothing changed)"] : []),
          "",
        ].join("\n"),
    );
    exit(EXIT.ok);
  });
}
