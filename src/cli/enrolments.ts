/**
 * `steward enrolments [--all]`, `steward enrolments approve NAME [--roots DIR,...] [--commit|--print]`,
 * `steward enrolments deny NAME --reason TEXT`: the hosts that asked to join (src/hub/enrolment/),
 * read from the hub's database. Approving writes the host's Node document into the fleet repository
 * (src/repo/enrol.ts) — a commit on `steward/enrol-NAME` to merge, or on the tracked branch — and
 * the host is admitted once the hub serves a revision that declares it; denying refuses it from then
 * on. Either resolves the request's task with what was decided.
 */
import { resolve } from "node:path";
import { Command } from "commander";
import type { EnrolmentRecord } from "../hub/enrolment/records.js";
import { UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, clip, type OutputOptions, outputFormat, printResult } from "./output.js";
import { ago, renderTable } from "./table.js";

/** The table of requests: node, key, status, when, what the host says of itself, the labels it asks for. */
export function renderEnrolments(records: readonly EnrolmentRecord[], now: Date, wide = false): string {
  return renderTable(
    ["NODE", "KEY", "STATUS", "ASKED", "HOST", "LABELS", "DECISION"],
    records.map((r) => [
      r.node,
      wide ? r.nkey : `${r.nkey.slice(0, 12)}…`,
      r.status,
      ago(r.requestedAt, now),
      clip(`${r.facts.hostname} (${r.facts.os}, ${r.facts.arch}, agent ${r.facts.agentVersion})`, 60, wide),
      Object.entries(r.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(",") || "-",
      r.decision ? clip(`${r.decidedBy}: ${r.decision}`, 60, wide) : "-",
    ]),
  );
}

function deciderName(io: CliIo, as?: string): string {
  return as ?? io.env.STEWARD_OPERATOR ?? io.env.USER ?? io.env.LOGNAME ?? "operator";
}

interface ApproveOptions extends OutputOptions {
  key?: string;
  roots?: string;
  commit?: boolean;
  print?: boolean;
  push?: boolean;
  repo?: string;
  branch?: string;
  as?: string;
}

/** The `enrolments` command and its `approve` and `deny` subcommands. */
export function enrolmentsCommand(
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const open = async () => {
    const { statePaths, openHubStore } = await import("./hub-state.js");
    const paths = statePaths(io, globals());
    return { paths, store: await openHubStore(paths) };
  };
  const context = async (opened: Awaited<ReturnType<typeof open>>) => {
    const { idFactory } = await import("../hub/ids.js");
    const { systemClock } = await import("../hub/clock.js");
    return {
      store: opened.store,
      now: new Date().toISOString(),
      newId: idFactory(systemClock),
    };
  };
  const command = new Command("enrolments")
    .description(
      "hosts that asked to join the fleet: list them, approve (write their Node document) or deny them",
    )
    .option("--all", "include the requests already decided (approved, admitted, denied)");
  addOutputOptions(command).action(async (options: OutputOptions & { all?: boolean }) => {
    const opened = await open();
    try {
      const records = await opened.store.enrolments.requests(
        options.all ? undefined : ["queued", "conflict", "approved"],
      );
      await printResult(io, outputFormat(options, globals()), records, (wide) =>
        records.length === 0
          ? options.all
            ? "no host has asked to join\n"
            : "no host waits to join (--all lists the decided ones)\n"
          : renderEnrolments(records, new Date(), wide),
      );
      exit(EXIT.ok);
    } finally {
      await opened.store.close();
    }
  });

  command
    .command("approve")
    .description(
      "admit a host: write nodes/NAME.yaml (its identity, the labels it asked for, --roots) as a commit on the branch steward/enrol-NAME to merge, or --commit on the tracked branch, or --print it",
    )
    .argument("<name>", "the node name the host asked for")
    .option("--key <key>", "the host's key (or its start), when several hosts asked for the name")
    .option(
      "--roots <dirs>",
      "the node's spec.roots, comma-separated (default: spec.enrolment.roots in steward.yaml)",
    )
    .option("--commit", "commit on the tracked branch instead of the branch steward/enrol-NAME")
    .option("--print", "print the Node document and write nothing")
    .option("--push", "push the commit to origin (or the --repo URL)")
    .option(
      "--repo <path|url>",
      "the fleet repository (default: the one the hub tracks, else this directory)",
    )
    .option("--branch <name>", "the tracked branch (default: the hub's, else main)")
    .option("--as <name>", "who approves (default: STEWARD_OPERATOR, else USER)")
    .action(async (name: string, _local: unknown, self: Command) => {
      const options = self.optsWithGlobals<ApproveOptions>();
      if (options.commit && options.print)
        throw new UsageError("--commit and --print exclude each other: give one");
      const roots = (options.roots ?? "")
        .split(",")
        .map((root) => root.trim())
        .filter((root) => root !== "");
      for (const root of roots)
        if (!root.startsWith("/"))
          throw new UsageError(
            `--roots ${options.roots}: "${root}" is not an absolute directory (e.g. /srv/web)`,
          );
      const [{ enrolledNode, recordApproval, requestToDecide }, { parseLocation }, { proposeEnrolment }] =
        await Promise.all([
          import("../hub/enrolment/enrolments.js"),
          import("../repo/git.js"),
          import("../repo/enrol.js"),
        ]);
      const { readHubFile, nudgeHub } = await import("./hub-state.js");
      const opened = await open();
      try {
        const record = await requestToDecide(opened.store, name, options.key);
        if (record.status === "denied" && !options.key)
          throw new UsageError(
            `the request of "${name}" was denied: pass --key ${record.nkey} to approve it all the same`,
          );
        const hub = readHubFile(opened.paths);
        const repo =
          options.repo ?? (hub?.repo && !/^[a-z][a-z0-9+.-]*:\/\//i.test(hub.repo) ? hub.repo : ".");
        const branch = options.branch ?? hub?.branch ?? "main";
        const proposal = await proposeEnrolment({
          location: parseLocation(repo, io.cwd),
          branch,
          node: enrolledNode(record, roots),
          mode: options.print ? "print" : options.commit ? "commit" : "branch",
          push: options.push === true,
          env: io.env,
          cacheDir: resolve(io.cwd, globals().state, "git"),
        });
        if (options.print) {
          io.stdout(proposal.content);
          exit(EXIT.ok);
          return;
        }
        const by = deciderName(io, options.as);
        const approved = await recordApproval(await context(opened), record, {
          by,
          proposal: { path: proposal.path, branch: proposal.branch!, commit: proposal.commit! },
        });
        await printResult(io, outputFormat(options, globals()), { request: approved, proposal }, () =>
          [
            `approved "${name}" (key ${record.nkey.slice(0, 12)}…): ${proposal.edited ? "its identity in" : "wrote"} ${proposal.path} in commit ${proposal.commit!.slice(0, 12)} on ${proposal.branch}${proposal.pushed ? " (pushed)" : ""}`,
            options.commit
              ? `the host is admitted once the hub syncs ${branch}`
              : `merge ${proposal.branch} into ${branch} (open a pull request${proposal.pushed ? "" : " once pushed"}): the host is admitted once the hub syncs it`,
            "",
          ].join("\n"),
        );
      } finally {
        await opened.store.close();
      }
      await nudgeHub(opened.paths, options.commit ? { sync: true } : {});
      exit(EXIT.ok);
    });

  command
    .command("deny")
    .description("refuse a host: its request is answered `refused` from now on, and its task resolved")
    .argument("<name>", "the node name the host asked for")
    .requiredOption("--reason <text>", "why (recorded, and said to the host)")
    .option("--key <key>", "the host's key (or its start), when several hosts asked for the name")
    .option("--as <name>", "who denies (default: STEWARD_OPERATOR, else USER)")
    .action(async (name: string, _local: unknown, self: Command) => {
      const options = self.optsWithGlobals<OutputOptions & { reason: string; key?: string; as?: string }>();
      if (options.reason.trim() === "")
        throw new UsageError('say why: `steward enrolments deny NAME --reason "..."`');
      const { denyEnrolment, requestToDecide } = await import("../hub/enrolment/enrolments.js");
      const { nudgeHub } = await import("./hub-state.js");
      const opened = await open();
      try {
        const record = await requestToDecide(opened.store, name, options.key);
        const denied = await denyEnrolment(await context(opened), record, {
          by: deciderName(io, options.as),
          reason: options.reason,
        });
        await printResult(
          io,
          outputFormat(options, globals()),
          { request: denied },
          () =>
            `denied "${name}" (key ${record.nkey.slice(0, 12)}…) by ${denied.decidedBy}: ${options.reason}; the host is refused from now on\n`,
        );
      } finally {
        await opened.store.close();
      }
      await nudgeHub(opened.paths);
      exit(EXIT.ok);
    });
  return command;
}
