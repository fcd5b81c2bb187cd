/**
 * The single-file agent the hub uploads to hosts that have no steward: `dist/steward-agent.mjs`, built
 * by `npm run build:agent`, with its sha256 in `steward-agent.mjs.sha256` (sha256sum format). The file
 * names its version in its second line (`// steward-agent 0.1.0`), so the remote path
 * `~/.steward/bin/<version>-<sha256 prefix>/` changes whenever the bytes do.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { StewardError } from "../../model/errors.js";

/** The agent file as the transport uploads it. */
export interface AgentArtifact {
  file: string;
  bytes: Buffer;
  /** Hex sha256 of `bytes`, as checked on the host. */
  sha256: string;
  version: string;
  /** `<version>-<first 12 hex of sha256>`: the directory name on hosts. */
  id: string;
}

/** File name of the bundle, locally and on hosts. */
export const AGENT_FILE_NAME = "steward-agent.mjs";

/** The agent file is missing, unreadable or does not match its checksum. */
export class AgentArtifactError extends StewardError {
  override readonly name = "AgentArtifactError";
  constructor(message: string, data: Record<string, unknown> = {}) {
    super("E_AGENT_ARTIFACT", message, { data });
  }
}

/** `dist/steward-agent.mjs` of the steward package this module belongs to. */
export function defaultAgentFile(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) {
      try {
        const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string };
        if (pkg.name === "steward") return join(dir, "dist", AGENT_FILE_NAME);
      } catch {
        // Not ours; keep walking up.
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return join(process.cwd(), "dist", AGENT_FILE_NAME);
    dir = parent;
  }
}

/** Reads the agent file and checks it against its `.sha256` file. */
export function loadAgentArtifact(file: string = defaultAgentFile()): AgentArtifact {
  const fix = "run `npm run build:agent` in the steward checkout (or reinstall the package)";
  let bytes: Buffer;
  let sumText: string;
  try {
    bytes = readFileSync(file);
    sumText = readFileSync(`${file}.sha256`, "utf8");
  } catch (error) {
    throw new AgentArtifactError(
      `the single-file agent ${file} (or its .sha256) is missing: hosts without steward cannot be served — ${fix}`,
      { file, cause: String(error) },
    );
  }
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const expected = sumText.trim().split(/\s+/)[0];
  if (expected !== sha256)
    throw new AgentArtifactError(
      `${file} does not match ${file}.sha256 (sha256 ${sha256}, expected ${expected}) — ${fix}`,
      { file, sha256, expected },
    );
  const version = /^\/\/ steward-agent (\S+)/m.exec(bytes.subarray(0, 512).toString("utf8"))?.[1];
  if (!version)
    throw new AgentArtifactError(`${file} does not name its version ("// steward-agent X.Y.Z") — ${fix}`, {
      file,
    });
  return { file, bytes, sha256, version, id: `${version}-${sha256.slice(0, 12)}` };
}
