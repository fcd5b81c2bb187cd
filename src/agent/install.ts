/**
 * The agent as a systemd service: `planInstall` (pure) says which files `steward agent install`
 * writes — the single-file agent under `/usr/local/lib/steward`, its configuration
 * `/etc/steward/agent.json`, a copy of the enrolment credential, and the unit
 * `/etc/systemd/system/steward-agent.service` — and which directories it makes; `--dry-run` prints
 * the plan, `writeInstall` carries it out. A `prefix` puts every path under another root (an image
 * being built, a test), and the files name the paths there.
 *
 * The unit runs the agent as root, because it manages what its assignments declare: files under
 * any root, packages, systemd units, containers, services. So it is hardened only where that still
 * lets it do so, and `KillMode=process`: stopping or restarting the agent never kills the services
 * it supervises or a one-shot it runs — they live in its cgroup and the next agent adopts them.
 */
import { chmodSync, existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The unit's name. */
export const UNIT_NAME = "steward-agent.service";

/** What `steward agent install` is told. */
export interface InstallInput {
  nats: string;
  node: string;
  /** Absolute, as the agent will see it; default `<prefix>/var/lib/steward`. */
  state?: string;
  /** `/` for the real system. */
  prefix: string;
  /** The Node.js binary the service runs (absolute). */
  nodeBinary: string;
  /** The single-file agent to install. */
  agent: { bytes: Uint8Array; sha256: string; source: string };
  /** The shared enrolment credential to copy (its text; never printed). */
  token?: { source: string; text: string };
  labels?: Record<string, string>;
  tls?: { ca?: string; cert?: string; key?: string };
}

/** One file of the plan: `secret` files are never printed. */
export interface InstallFile {
  path: string;
  mode: number;
  content: Uint8Array | string;
  /** What `--dry-run` prints instead of the content (the agent's bytes, a credential). */
  summary?: string;
}

/** What install writes and makes, and the service's command line. */
export interface InstallPlan {
  unit: string;
  unitFile: string;
  configFile: string;
  agentFile: string;
  stateDir: string;
  /** The service's command line, as the unit's ExecStart says it. */
  execStart: string[];
  /** Directories made first, with their modes (`own`: steward's, so their mode is set even if they exist). */
  directories: { path: string; mode: number; own: boolean }[];
  files: InstallFile[];
}

/** Quotes one word of a systemd command line when it needs it. */
function systemdWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `"${word.replace(/(["\\])/g, "\\$1")}"`;
}

/** The paths of an installation under `prefix`. */
export function installPaths(prefix: string, state?: string) {
  const at = (path: string) => join(prefix, path);
  return {
    unitFile: at(`/etc/systemd/system/${UNIT_NAME}`),
    configDir: at("/etc/steward"),
    configFile: at("/etc/steward/agent.json"),
    tokenFile: at("/etc/steward/enrol.creds"),
    libDir: at("/usr/local/lib/steward"),
    agentFile: at("/usr/local/lib/steward/steward-agent.mjs"),
    stateDir: state ?? at("/var/lib/steward"),
  };
}

/** Plans the installation (nothing is written). */
export function planInstall(input: InstallInput): InstallPlan {
  const paths = installPaths(input.prefix, input.state);
  const config = {
    nats: input.nats,
    node: input.node,
    state: paths.stateDir,
    ...(input.token ? { tokenFile: paths.tokenFile } : {}),
    ...(input.labels && Object.keys(input.labels).length > 0 ? { labels: input.labels } : {}),
    ...(input.tls && Object.keys(input.tls).length > 0 ? { tls: input.tls } : {}),
  };
  const execStart = [input.nodeBinary, paths.agentFile, "agent", "--config", paths.configFile];
  // systemd makes /var/lib/steward itself (mode 0700, before each start); elsewhere install does.
  const stateDirectory = /^\/var\/lib\/([a-z0-9][-a-z0-9_.]*)$/.exec(paths.stateDir)?.[1];
  const unit = [
    `# ${UNIT_NAME}: the steward agent of node ${input.node}, written by \`steward agent install\`.`,
    '# Why each directive is here: the README\'s "Adding a host".',
    "[Unit]",
    `Description=steward agent (node ${input.node})`,
    "Wants=network-online.target",
    "After=network-online.target",
    "",
    "[Service]",
    "Type=exec",
    `ExecStart=${execStart.map(systemdWord).join(" ")}`,
    "Restart=on-failure",
    "RestartSec=5s",
    "RestartPreventExitStatus=2",
    "KillMode=process",
    ...(stateDirectory ? [`StateDirectory=${stateDirectory}`, "StateDirectoryMode=0700"] : []),
    "StandardOutput=journal",
    "StandardError=journal",
    "SyslogIdentifier=steward-agent",
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");
  const files: InstallFile[] = [
    {
      path: paths.agentFile,
      mode: 0o755,
      content: input.agent.bytes,
      summary: `a copy of ${input.agent.source} (${Math.round(input.agent.bytes.length / 1024)} KiB, sha256 ${input.agent.sha256})`,
    },
    { path: `${paths.agentFile}.sha256`, mode: 0o644, content: `${input.agent.sha256}  steward-agent.mjs\n` },
    { path: paths.configFile, mode: 0o644, content: `${JSON.stringify(config, null, 2)}\n` },
    ...(input.token
      ? [
          {
            path: paths.tokenFile,
            mode: 0o600,
            content: input.token.text,
            summary: `a copy of ${input.token.source} (the shared enrolment credential: not shown)`,
          },
        ]
      : []),
    { path: paths.unitFile, mode: 0o644, content: unit },
  ];
  return {
    unit,
    unitFile: paths.unitFile,
    configFile: paths.configFile,
    agentFile: paths.agentFile,
    stateDir: paths.stateDir,
    execStart,
    directories: [
      { path: paths.libDir, mode: 0o755, own: true },
      { path: paths.configDir, mode: 0o755, own: true },
      { path: paths.stateDir, mode: 0o700, own: true },
      { path: dirname(paths.unitFile), mode: 0o755, own: false },
    ],
    files,
  };
}

/** The plan as `--dry-run` prints it: every directory and file, secrets and the agent's bytes summarised. */
export function describeInstall(plan: InstallPlan): string {
  const lines: string[] = [];
  for (const dir of plan.directories)
    lines.push(`directory ${dir.path} (mode ${dir.mode.toString(8).padStart(4, "0")})`);
  for (const file of plan.files) {
    lines.push(`file ${file.path} (mode ${file.mode.toString(8).padStart(4, "0")})`);
    if (file.summary) lines.push(`  ${file.summary}`);
    else
      lines.push(
        ...String(file.content)
          .replace(/\n$/, "")
          .split("\n")
          .map((line) => `  | ${line}`),
      );
  }
  return `${lines.join("\n")}\n`;
}

/** Makes the directories and writes the files of the plan (each atomically: a temporary name, then rename). */
export function writeInstall(plan: InstallPlan): void {
  for (const dir of plan.directories) {
    mkdirSync(dir.path, { recursive: true, mode: dir.mode });
    if (dir.own) chmodSync(dir.path, dir.mode);
  }
  for (const file of plan.files) {
    mkdirSync(dirname(file.path), { recursive: true });
    const temporary = `${file.path}.steward-${process.pid}.tmp`;
    writeFileSync(temporary, file.content, { mode: file.mode });
    chmodSync(temporary, file.mode);
    renameSync(temporary, file.path);
  }
}

/** True when systemd runs this machine (sd_booted: /run/systemd/system exists). */
export function systemdRuns(root = "/"): boolean {
  return existsSync(join(root, "run/systemd/system"));
}
