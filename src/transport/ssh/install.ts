/**
 * Putting the single-file agent on a host that has none: upload over SFTP to a temporary name next to
 * its place, check the sha256 on the host, then rename into place. The rename is atomic, so a host
 * never runs a half-written agent, and two hubs (or two nodes on one host) uploading at once both end
 * with the same good file.
 */
import { randomBytes } from "node:crypto";
import { DispatchError } from "../../hub/transport.js";
import type { AgentArtifact } from "./artifact.js";
import type { SshConnection } from "./connection.js";
import { shellQuote } from "./launch.js";

/** Uploads `artifact` to the absolute remote `path` (as the launcher printed it) and verifies it there. */
export async function installAgent(
  connection: SshConnection,
  artifact: AgentArtifact,
  path: string,
  node: string,
): Promise<void> {
  const subject = `node "${node}" (${connection.label})`;
  if (!path.startsWith("/") || !path.endsWith(`/${artifact.id}/steward-agent.mjs`))
    throw new DispatchError(
      `${subject}: the launcher named an unexpected agent path ${JSON.stringify(path)}; is $HOME set for the SSH user?`,
      "permanent",
      "AgentInstallFailed",
    );
  const dir = path.slice(0, path.lastIndexOf("/"));
  const temporary = `${dir}/.upload-${randomBytes(6).toString("hex")}`;
  const dropped = () =>
    new DispatchError(
      `${subject}: the session dropped while installing the agent — retrying`,
      "transient",
      "SessionDropped",
    );
  const prepare = await connection.exec(`umask 077 && mkdir -p ${shellQuote(dir)}`);
  if (prepare.dropped) throw dropped();
  if (prepare.code !== 0)
    throw new DispatchError(
      `${subject}: cannot create ${dir} for the agent (${prepare.stderr.trim() || `exit ${prepare.code}`}) — check the SSH user's home directory`,
      "permanent",
      "AgentInstallFailed",
    );
  try {
    const sftp = await connection.sftp();
    try {
      await new Promise<void>((resolve, reject) =>
        sftp.writeFile(temporary, artifact.bytes, { mode: 0o644 }, (error) =>
          error ? reject(error) : resolve(),
        ),
      );
    } finally {
      sftp.end();
    }
  } catch (error) {
    throw new DispatchError(
      `${subject}: uploading the agent over SFTP failed (${error instanceof Error ? error.message : String(error)}) — check that the SFTP subsystem is enabled in the host's sshd_config; retrying`,
      "transient",
      "AgentUploadFailed",
      { cause: error },
    );
  }
  // sha256sum is coreutils; BSDs and macOS have shasum. Either prints the hex digest first.
  const verify = await connection.exec(
    [
      `t=${shellQuote(temporary)}`,
      `if command -v sha256sum >/dev/null 2>&1; then sum=$(sha256sum "$t"); else sum=$(shasum -a 256 "$t"); fi || { rm -f "$t"; exit 3; }`,
      `sum=\${sum%% *}`,
      `if [ "$sum" != ${shellQuote(artifact.sha256)} ]; then rm -f "$t"; echo "$sum"; exit 4; fi`,
      `mv -f "$t" ${shellQuote(path)}`,
    ].join("\n"),
  );
  if (verify.dropped) throw dropped();
  if (verify.code === 4)
    throw new DispatchError(
      `${subject}: the uploaded agent's sha256 on the host is ${verify.stdout.toString().trim()}, expected ${artifact.sha256}; it was removed — retrying`,
      "transient",
      "AgentChecksumMismatch",
    );
  if (verify.code !== 0)
    throw new DispatchError(
      `${subject}: cannot verify or move the uploaded agent into place (${verify.stderr.trim() || `exit ${verify.code ?? verify.signal}`}) — the host needs sha256sum (coreutils) or shasum`,
      "permanent",
      "AgentInstallFailed",
    );
}
