/**
 * A Plan as text (for the terminal) and as Markdown (for a pull request comment). Both list nodes,
 * then instances, then resources, then the rollout; neither adds information the Plan lacks.
 */
import type { FieldChange, InstancePlan, Plan, ResourceChange, RolloutPlan, SecretChange } from "./plan.js";

/** The revisions a plan goes between, for the heading. */
export interface PlanHeading {
  from?: { sha: string; subject?: string };
  to?: { sha: string; subject?: string };
}

const CHANGE_WORDS: Record<InstancePlan["change"], string> = {
  added: "added",
  changed: "new generation",
  retired: "retired (no longer managed; nothing is deleted)",
};
const MARKS: Record<string, string> = { added: "+", changed: "~", retired: "-", removed: "-" };

function value(v: unknown): string {
  return v === undefined ? "(unset)" : JSON.stringify(v);
}

function field(change: FieldChange): string {
  return `${change.path}: ${value(change.before)} → ${value(change.after)}`;
}

/** A secret's change: its ciphertext hashes, never its content (the hub and the Action cannot read it). */
function secretLine(secret: SecretChange): string {
  return `secret changed: ${secret.path}, ciphertext ${shortHash(secret.before) || "(new)"} → ${shortHash(secret.after) || "(none)"} (the content is not shown: only the hosts can read it)`;
}

function shortHash(hash: string | undefined): string {
  return hash ? `${hash.slice(0, 19)}…` : "";
}

function summaryLine(plan: Plan): string {
  const s = plan.summary;
  return `${s.added} added, ${s.changed} new generations, ${s.retired} retired, ${s.unchanged} unchanged (${s.nodes} node${s.nodes === 1 ? "" : "s"} affected)`;
}

function revision(ref: { sha: string; subject?: string } | undefined): string {
  if (!ref) return "(empty)";
  return ref.subject ? `${ref.sha.slice(0, 12)} (${ref.subject})` : ref.sha.slice(0, 12);
}

/** `canary web-1 (soak 5s) → web-2, web-3 → web-4`, or why nothing is dispatched. */
export function describeSteps(rollout: RolloutPlan): string {
  if (rollout.stage === "observe") return "observe-only: reports are compared, nothing is dispatched";
  const steps = rollout.steps.map((step) =>
    step.kind === "canary"
      ? `canary ${step.nodes.join(", ")}${step.soak ? ` (soak ${step.soak})` : ""}`
      : step.nodes.join(", "),
  );
  const failures =
    rollout.maxFailures === 0
      ? "pause on the first failure"
      : `pause after ${rollout.maxFailures + 1} failures`;
  return `${steps.join(" → ")}; ${failures}`;
}

function resourceTitle(resource: ResourceChange): string {
  return resource.kind === resource.name ? resource.kind : `${resource.kind} ${resource.name}`;
}

/** The plan for a terminal. */
export function renderPlanText(plan: Plan, heading: PlanHeading = {}): string {
  const out: string[] = [];
  if (heading.from || heading.to) out.push(`Plan ${revision(heading.from)} → ${revision(heading.to)}`);
  out.push(summaryLine(plan));
  if (plan.nodes.length === 0) {
    out.push("", "No instance changes.");
    return `${out.join("\n")}\n`;
  }
  for (const node of plan.nodes) {
    out.push("", `node ${node.node}`);
    for (const instance of node.instances) {
      const hashes =
        instance.change === "changed"
          ? `  ${shortHash(instance.beforeHash)} → ${shortHash(instance.afterHash)}`
          : "";
      out.push(`  ${MARKS[instance.change]} ${instance.key}  ${CHANGE_WORDS[instance.change]}${hashes}`);
      for (const change of instance.fields) out.push(`      ~ ${field(change)}`);
      for (const [label, list] of [
        ["", instance.resources],
        ["probe ", instance.probes],
      ] as const)
        for (const resource of list) {
          out.push(`      ${MARKS[resource.change]} ${label}${resourceTitle(resource)}`);
          for (const change of resource.fields) out.push(`          ${field(change)}`);
          for (const secret of resource.secrets ?? []) out.push(`          ${secretLine(secret)}`);
          if (resource.diff)
            for (const line of resource.diff.trimEnd().split("\n")) out.push(`          ${line}`);
        }
    }
  }
  if (plan.rollout.length > 0) {
    out.push("", "rollout");
    for (const rollout of plan.rollout)
      out.push(`  ${rollout.assignment} (${rollout.stage}): ${describeSteps(rollout)}`);
  }
  return `${out.join("\n")}\n`;
}

/** Diff lines shown per resource in Markdown before the rest is elided (comments have a size limit). */
const MARKDOWN_DIFF_LINES = 200;

function code(text: string): string {
  return `\`${text.replace(/`/g, "'")}\``;
}

/** The plan as a Markdown pull request comment. */
export function renderPlanMarkdown(plan: Plan, heading: PlanHeading = {}): string {
  const out: string[] = [];
  const title =
    heading.from || heading.to
      ? `### steward plan: ${code(heading.from?.sha.slice(0, 12) ?? "(empty)")} → ${code(heading.to?.sha.slice(0, 12) ?? "")}`
      : "### steward plan";
  out.push(title, "", summaryLine(plan));
  for (const node of plan.nodes) {
    out.push("", `#### node ${code(node.node)}`, "");
    for (const instance of node.instances) {
      out.push(`- **${instance.key}**: ${CHANGE_WORDS[instance.change]}`);
      for (const change of instance.fields)
        out.push(`  - ${code(change.path)}: ${code(value(change.before))} → ${code(value(change.after))}`);
      for (const [label, list] of [
        ["", instance.resources],
        ["probe ", instance.probes],
      ] as const)
        for (const resource of list) {
          const fields = resource.fields.map(
            (c) => `${code(c.path)} ${code(value(c.before))} → ${code(value(c.after))}`,
          );
          out.push(
            `  - ${resource.change} ${code(label + resourceTitle(resource))}${fields.length ? `: ${fields.join(", ")}` : ""}`,
          );
          for (const secret of resource.secrets ?? [])
            out.push(
              `    - secret changed: ${code(secret.path)}, ciphertext ${code(shortHash(secret.before) || "(new)")} → ${code(shortHash(secret.after) || "(none)")} (the content is not shown: only the hosts can read it)`,
            );
          if (resource.diff) {
            const lines = resource.diff.trimEnd().split("\n");
            const shown = lines.slice(0, MARKDOWN_DIFF_LINES);
            if (lines.length > shown.length) shown.push(`… ${lines.length - shown.length} more lines`);
            out.push("", "    ```diff", ...shown.map((line) => `    ${line}`), "    ```", "");
          }
        }
    }
  }
  if (plan.rollout.length > 0) {
    out.push("", "#### Rollout", "", "| assignment | stage | nodes | steps |", "| --- | --- | --- | --- |");
    for (const rollout of plan.rollout)
      out.push(
        `| ${rollout.assignment} | ${rollout.stage} | ${rollout.nodes.length} | ${describeSteps(rollout).replace(/\|/g, "\\|")} |`,
      );
  }
  return `${out.join("\n")}\n`;
}
