/**
 * `container`: a container run with docker or podman. Observed by the image actually running (its
 * image id and repository digests), not merely "a container of that name exists": a container
 * created from another digest is replaced. The container carries labels naming its assignment,
 * resource and a fingerprint of its definition. A replaced container is kept (stopped, renamed
 * `<name>.previous`) until the next replacement. Environment values go through an env file in the
 * state directory, never the command line. An image that does not exist fails permanently; an engine
 * or registry that does not answer is transient.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { contentHash } from "../../model/canonical.js";
import type { ContainerResource } from "../../model/generated.js";
import { writeFileAtomic } from "../atomic.js";
import type { Applied, Driver, DriverContext, Plan, PlanFacts } from "../driver.js";
import { runEvidence } from "../evidence.js";
import { permanent, type ResourceFailure, transient } from "../failure.js";
import type { RunResult } from "../runner.js";
import { fingerprintEnv } from "../secrets.js";
import { memo, runTool } from "../tools.js";

/** A container as the engine reports it. */
export interface ContainerObservation {
  engine: string;
  exists: boolean;
  running?: boolean;
  status?: string;
  exitCode?: number;
  /** The image id (config digest) the container runs. */
  imageId?: string;
  /** Repository digests of that image (`name@sha256:...`): the digest actually running. */
  repoDigests?: string[];
  fingerprint?: string;
}

const INSTALL_HINT = "install docker or podman, or set engine: to the one installed";

/** The container's name on the engine: steward-<assignment>-<resource>, with only allowed characters. */
export function containerName(assignment: string, resource: string): string {
  return `steward-${assignment}-${resource}`.replace(/[^a-zA-Z0-9_.-]/g, "_");
}

/** The digest part of an image reference (`sha256:...`), if it is pinned by digest. Pure. */
export function pinnedDigest(image: string): string | undefined {
  const at = image.indexOf("@");
  return at < 0 ? undefined : image.slice(at + 1);
}

/** Classifies a failed pull or run by what the engine printed. Pure. */
export function engineFailure(what: string, result: RunResult): ResourceFailure {
  const output = `${result.stdout}\n${result.stderr}`;
  const evidence = runEvidence(result);
  if (
    /Cannot connect to the (Docker|Podman) daemon|Is the docker daemon running|connection refused.*sock/i.test(
      output,
    )
  )
    return transient("EngineUnavailable", `${what}: the container engine does not answer`, evidence);
  if (
    /manifest unknown|manifest for .* not found|not found: manifest|repository .* not found|pull access denied|does not exist|invalid reference format|no such image/i.test(
      output,
    )
  )
    return permanent(
      "ImageNotFound",
      `${what}: the image does not exist in its registry (check the name and digest)`,
      evidence,
    );
  if (/unauthorized|authentication required|denied: /i.test(output))
    return permanent("RegistryAuthFailed", `${what}: the registry refused the credentials`, evidence);
  if (
    /timeout|temporary failure|no such host|i\/o timeout|network is unreachable|TLS handshake|connection reset|EOF/i.test(
      output,
    )
  )
    return transient("RegistryUnreachable", `${what}: the registry could not be reached`, evidence);
  if (result.timedOut) return transient("CommandTimedOut", `${what} timed out`, evidence);
  return transient("EngineFailed", `${what} exited with ${result.exitCode}`, evidence);
}

/** The first engine that answers, or the failure saying why none does (memoised per attempt). */
async function engineFor(resource: ContainerResource, ctx: DriverContext): Promise<string> {
  const candidates =
    resource.engine && resource.engine !== "auto"
      ? [resource.engine]
      : (ctx.tools.containerEngines ?? ["docker", "podman"]);
  const found = await memo(ctx, `engine:${candidates.join(",")}`, async () => {
    let unavailable: ResourceFailure | undefined;
    for (const engine of candidates) {
      const result = await ctx.runner.run({
        argv: [engine, "version", "--format", "{{.Server.Version}}"],
        env: ctx.env,
        timeoutMs: 15_000,
      });
      if (result.spawnError === "ENOENT") continue;
      if (result.exitCode === 0) return { engine };
      unavailable ??= engineFailure(`${engine} version`, result);
    }
    return {
      failure:
        unavailable ??
        permanent(
          "ToolMissing",
          `no container engine (${candidates.join(", ")}) is installed on this host: ${INSTALL_HINT}`,
        ),
    };
  });
  if ("failure" in found) throw found.failure;
  return found.engine!;
}

/**
 * Hash of the container's definition as run on this host. Pure. Secret values count by the digest
 * of their plaintext (`secretDigests`), so a new ciphertext of the same value recreates nothing.
 */
export function containerFingerprint(
  resource: ContainerResource,
  volumes: string[],
  secretDigests: Readonly<Record<string, string>> = {},
): string {
  return contentHash({
    image: resource.image,
    args: resource.args ?? [],
    ports: resource.ports ?? [],
    env: fingerprintEnv(resource.env, secretDigests),
    volumes,
  });
}

/** Bind mounts with their host side mapped under `--root` (and confined to the node's roots). */
function mappedVolumes(resource: ContainerResource, ctx: DriverContext): string[] {
  return (resource.volumes ?? []).map((volume) => {
    if (!volume.startsWith("/")) return volume;
    const colon = volume.indexOf(":");
    const hostSide = colon < 0 ? volume : volume.slice(0, colon);
    return `${ctx.paths.confined(hostSide)}${colon < 0 ? "" : volume.slice(colon)}`;
  });
}

async function engineRun(
  ctx: DriverContext,
  engine: string,
  args: string[],
  timeoutMs = 120_000,
): Promise<RunResult> {
  return runTool(ctx, [engine, ...args], INSTALL_HINT, { timeoutMs });
}

interface Desired {
  fingerprint: string;
  volumes: string[];
}

function desired(resource: ContainerResource, ctx: DriverContext): Desired {
  const volumes = mappedVolumes(resource, ctx);
  return { volumes, fingerprint: containerFingerprint(resource, volumes, ctx.secrets?.digests) };
}

/** The `container` driver. */
export const containerDriver: Driver<ContainerResource, ContainerObservation & { wanted: string }> = {
  kind: "container",

  async observe(resource, ctx) {
    const engine = await engineFor(resource, ctx);
    const wanted = desired(resource, ctx).fingerprint;
    const name = containerName(ctx.assignment, resource.name);
    const inspect = await engineRun(ctx, engine, ["container", "inspect", name]);
    if (inspect.exitCode !== 0) {
      if (/no such (container|object)/i.test(inspect.stderr)) return { engine, exists: false, wanted };
      throw engineFailure(`${engine} container inspect`, inspect);
    }
    const [info] = JSON.parse(inspect.stdout) as {
      Image: string;
      State: { Running: boolean; Status: string; ExitCode: number };
      Config: { Labels?: Record<string, string> };
    }[];
    const image = await engineRun(ctx, engine, [
      "image",
      "inspect",
      "--format",
      "{{json .RepoDigests}}",
      info!.Image,
    ]);
    const repoDigests = image.exitCode === 0 ? ((JSON.parse(image.stdout) as string[] | null) ?? []) : [];
    return {
      engine,
      exists: true,
      running: info!.State.Running,
      status: info!.State.Status,
      exitCode: info!.State.ExitCode,
      imageId: info!.Image,
      repoDigests,
      fingerprint: info!.Config.Labels?.["steward.fingerprint"],
      wanted,
    };
  },

  plan(resource, observed, facts: PlanFacts): Plan {
    if (facts.state === "stopped")
      return observed.running
        ? { action: "stop", diff: ["running → stopped"] }
        : { action: "none", diff: [] };
    if (!observed.exists) return { action: "create", diff: [`absent → running ${resource.image}`] };
    const diff: string[] = [];
    const digest = pinnedDigest(resource.image);
    if (digest && !(observed.repoDigests ?? []).some((ref) => ref.endsWith(`@${digest}`)))
      diff.push(`running image ${observed.repoDigests?.[0] ?? observed.imageId} → ${resource.image}`);
    if (observed.fingerprint !== observed.wanted)
      diff.push("definition changed (image, args, ports, env or volumes)");
    if (diff.length > 0) return { action: "update", diff };
    if (!observed.running)
      return { action: "start", diff: [`${observed.status} (exit ${observed.exitCode}) → running`] };
    return { action: "none", diff: [] };
  },

  async apply(resource, plan, observed, ctx): Promise<Applied> {
    const engine = observed.engine;
    const name = containerName(ctx.assignment, resource.name);
    if (plan.action === "stop") {
      const result = await engineRun(ctx, engine, ["stop", name]);
      if (result.exitCode !== 0) throw engineFailure(`${engine} stop`, result);
      return { action: "stopped" };
    }
    if (plan.action === "start") {
      const result = await engineRun(ctx, engine, ["start", name]);
      if (result.exitCode !== 0) throw engineFailure(`${engine} start`, result);
      return { action: "started" };
    }
    const present = await engineRun(ctx, engine, ["image", "inspect", resource.image]);
    if (present.exitCode !== 0) {
      const pull = await engineRun(ctx, engine, ["pull", resource.image], 30 * 60_000);
      if (pull.exitCode !== 0) throw engineFailure(`${engine} pull ${resource.image}`, pull);
    }
    if (observed.exists) {
      // Keep the replaced container, stopped, until the next replacement: recoverable.
      await engineRun(ctx, engine, ["rm", "-f", `${name}.previous`]);
      await engineRun(ctx, engine, ["stop", name]);
      const renamed = await engineRun(ctx, engine, ["rename", name, `${name}.previous`]);
      if (renamed.exitCode !== 0) throw engineFailure(`${engine} rename`, renamed);
    }
    const { volumes, fingerprint } = desired(resource, ctx);
    const envDir = join(ctx.store.dir, "containers");
    mkdirSync(envDir, { recursive: true, mode: 0o700 });
    const envFile = join(envDir, `${name}.env`);
    // The environment file is the host's own (mode 0600 in the state directory): secret values are
    // decrypted into it, here only.
    const env = ctx.secrets ? await ctx.secrets.environment(resource.env) : (resource.env ?? {});
    await writeFileAtomic(
      envFile,
      Object.entries(env)
        .map(([key, value]) => `${key}=${value}\n`)
        .join(""),
      { mode: 0o600 },
    );
    const args = [
      "run",
      "--detach",
      "--name",
      name,
      "--restart",
      "unless-stopped",
      "--label",
      `steward.assignment=${ctx.assignment}`,
      "--label",
      `steward.resource=${resource.name}`,
      "--label",
      `steward.fingerprint=${fingerprint}`,
      "--env-file",
      envFile,
      ...(resource.ports ?? []).flatMap((port) => ["--publish", port]),
      ...volumes.flatMap((volume) => ["--volume", volume]),
      resource.image,
      ...(resource.args ?? []),
    ];
    const run = await engineRun(ctx, engine, args, 10 * 60_000);
    if (run.exitCode !== 0) throw engineFailure(`${engine} run ${resource.image}`, run);
    return { action: observed.exists ? "updated" : "created" };
  },
};
