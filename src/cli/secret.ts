/**
 * `steward secret encrypt|edit|update`: secrets in the fleet repository, encrypted for the hosts
 * they are placed on and the fleet's operators (src/repo/secrets.ts does the work). Exit 0 done,
 * 1 when the repository cannot say whom to encrypt for (a node without an identity), 2 for a flag,
 * file or identity that cannot be used.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { EnvironmentError, UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

/** CliIo, plus standard input for `encrypt -` (tests pass their own). */
export type SecretCliIo = CliIo & { stdin?: () => Promise<Buffer> };

interface EncryptOptions extends OutputOptions {
  repo: string;
  out: string;
  assignment?: string;
  node?: string[];
  selector?: string[];
  operatorRecipient?: string[];
  binary?: boolean;
}

interface UpdateOptions extends OutputOptions {
  repo: string;
  identity?: string;
  operatorRecipient?: string[];
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function readStdin(): Promise<Buffer> {
  return new Promise((resolvePromise, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on("data", (chunk: Buffer) => chunks.push(chunk));
    process.stdin.on("end", () => resolvePromise(Buffer.concat(chunks)));
    process.stdin.on("error", reject);
  });
}

/** `--selector k=v` flags as labels; a flag without `=` is a usage error. */
function selectorOf(flags: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const flag of flags) {
    const eq = flag.indexOf("=");
    if (eq <= 0)
      throw new UsageError(`--selector ${JSON.stringify(flag)} is not KEY=VALUE (e.g. --selector role=db)`);
    labels[flag.slice(0, eq)] = flag.slice(eq + 1);
  }
  return labels;
}

/** Runs `$VISUAL` (or `$EDITOR`) on a file, as a shell would, and waits for it. */
function runEditor(io: CliIo, file: string): Promise<void> {
  const editor = io.env.VISUAL || io.env.EDITOR;
  if (!editor)
    throw new UsageError("set EDITOR (or VISUAL) to the editor to open the secret with, e.g. EDITOR=vi");
  const run = spawnSync("sh", ["-c", `${editor} "$1"`, "sh", file], { stdio: "inherit", env: io.env });
  if (run.error)
    throw new EnvironmentError(`cannot run the editor ${JSON.stringify(editor)}: ${run.error.message}`);
  if (run.status !== 0)
    throw new EnvironmentError(
      `the editor ${JSON.stringify(editor)} exited with ${run.status ?? run.signal}: the secret is left as it was`,
    );
  return Promise.resolve();
}

export function secretCommand(
  io: SecretCliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const secret = new Command("secret").description(
    "secrets in the fleet repository: encrypted for the hosts they are placed on, decrypted only there",
  );

  addOutputOptions(
    secret
      .command("encrypt")
      .description(
        "encrypt FILE (- for standard input) for the nodes it is placed on and the fleet's operators; writes --out and its recipient manifest",
      )
      .argument("<file>", "the plaintext, or - to read it from standard input")
      .requiredOption(
        "--out <path>",
        "where the encrypted secret goes, in the repository (e.g. files/db/server.key.age)",
      )
      .option("--repo <dir>", "the fleet repository", ".")
      .option("--assignment <name>", "encrypt for every node this assignment is placed on")
      .option("--node <name>", "encrypt for this node (repeat for more)", collect)
      .option("--selector <key=value>", "encrypt for the nodes with these labels (repeat for more)", collect)
      .option("--operator-recipient <age1...>", "also encrypt for this recipient (repeat for more)", collect)
      .option("--binary", "write age's binary format instead of armored text"),
  ).action(async (file: string, options: EncryptOptions) => {
    const given = [options.assignment, options.node, options.selector].filter((flag) => flag !== undefined);
    if (given.length !== 1)
      throw new UsageError(
        "say which nodes the secret is for with exactly one of --assignment NAME, --node NAME (repeatable) or --selector KEY=VALUE (repeatable)",
      );
    const placement = options.assignment
      ? { assignment: options.assignment }
      : options.node
        ? { nodes: options.node }
        : { selector: selectorOf(options.selector ?? []) };
    let plaintext: Buffer;
    if (file === "-") plaintext = await (io.stdin ?? readStdin)();
    else {
      try {
        plaintext = readFileSync(resolve(io.cwd, file));
      } catch (error) {
        throw new EnvironmentError(
          `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
        );
      }
    }
    const { encryptSecret, describeRecipients } = await import("../repo/secrets.js");
    const encrypted = await encryptSecret({
      repo: resolve(io.cwd, options.repo),
      plaintext,
      from: file === "-" ? "standard input" : file,
      out: resolve(io.cwd, options.out),
      placement,
      ...(options.operatorRecipient ? { operatorRecipients: options.operatorRecipient } : {}),
      ...(options.binary ? { binary: true } : {}),
    });
    await printResult(
      io,
      outputFormat(options, globals()),
      { path: encrypted.path, manifest: `${encrypted.path}.recipients`, recipients: encrypted.recipients },
      () =>
        `encrypted ${encrypted.path} for ${describeRecipients(encrypted.recipients)}; recipients in ${encrypted.path}.recipients\n` +
        `use it with secret: true (or env: {NAME: {secret: ${encrypted.path}, key: KEY}}), and keep the plaintext out of Git\n`,
    );
    exit(EXIT.ok);
  });

  addOutputOptions(
    secret
      .command("edit")
      .description(
        "decrypt PATH with your identity, open $EDITOR, and encrypt it again for the same recipients",
      )
      .argument("<path>", "the encrypted secret")
      .option("--identity <file>", "your age identity file (default: STEWARD_AGE_IDENTITY)"),
  ).action(async (path: string, options: OutputOptions & { identity?: string }) => {
    const { editSecret, operatorIdentities, describeRecipients } = await import("../repo/secrets.js");
    const identities = operatorIdentities(options.identity, io.env, io.cwd);
    const edited = await editSecret({
      file: path,
      cwd: io.cwd,
      identities,
      edit: (temporary) => runEditor(io, temporary),
    });
    await printResult(
      io,
      outputFormat(options, globals()),
      { path, changed: edited.changed, recipients: edited.recipients },
      () =>
        edited.changed
          ? `encrypted ${path} again for ${describeRecipients(edited.recipients)}: commit it to roll it out\n`
          : `${path} unchanged: nothing encrypted again\n`,
    );
    exit(EXIT.ok);
  });

  addOutputOptions(
    secret
      .command("update")
      .description(
        "encrypt secrets again for the nodes they are placed on now (and the fleet's operators); default: every secret the repository uses",
      )
      .argument("[paths...]", "secrets to update (repository paths)")
      .option("--repo <dir>", "the fleet repository", ".")
      .option("--identity <file>", "your age identity file (default: STEWARD_AGE_IDENTITY)")
      .option("--operator-recipient <age1...>", "also encrypt for this recipient (repeat for more)", collect),
  ).action(async (paths: string[], options: UpdateOptions) => {
    const { updateSecrets, operatorIdentities, describeRecipients } = await import("../repo/secrets.js");
    const updated = await updateSecrets({
      repo: resolve(io.cwd, options.repo),
      paths,
      identities: () => operatorIdentities(options.identity, io.env, io.cwd),
      ...(options.operatorRecipient ? { operatorRecipients: options.operatorRecipient } : {}),
      cwd: io.cwd,
    });
    await printResult(io, outputFormat(options, globals()), { secrets: updated }, () => {
      if (updated.length === 0) return "no assignment uses a secret: nothing to update\n";
      const lines = updated.map((entry) =>
        entry.action === "re-encrypted"
          ? `re-encrypted ${entry.path} for ${describeRecipients(entry.recipients)} (was ${describeRecipients(entry.before) || "no manifest"})`
          : entry.action === "up-to-date"
            ? `${entry.path}: up to date (${describeRecipients(entry.recipients)})`
            : `${entry.path}: skipped, ${entry.note}`,
      );
      const changed = updated.filter((entry) => entry.action === "re-encrypted").length;
      if (changed > 0)
        lines.push(
          `commit ${changed === 1 ? "it" : "them"}: a new generation for the instances that use ${changed === 1 ? "it" : "them"}, and nothing restarts on the hosts (the plaintext is the same)`,
        );
      return `${lines.join("\n")}\n`;
    });
    exit(EXIT.ok);
  });

  return secret;
}
