/**
 * The container driver against the real docker CLI. Where no daemon answers (as on the machine
 * these tests were written on) the driver must say so — a transient `EngineUnavailable` — and the
 * tests that need a running engine are reported as skipped with that reason in their name.
 */
import { spawnSync } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { containerName, engineFailure, pinnedDigest } from "../../src/agent/drivers/container.js";
import type { Resource } from "../../src/model/generated.js";
import { again, bundle, type Sandbox, sandbox } from "./helpers.js";

function answers(argv: string[]): boolean {
  const run = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 15_000 });
  return !run.error && run.status === 0;
}

const dockerCli = answers(["docker", "--version"]);
const dockerDaemon = dockerCli && answers(["docker", "version", "--format", "{{.Server.Version}}"]);
const podmanCli = answers(["podman", "--version"]);

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  if (dockerDaemon)
    spawnSync("docker", [
      "rm",
      "-f",
      containerName("demo", "sleeper"),
      `${containerName("demo", "sleeper")}.previous`,
    ]);
  await box.close();
});

const sleeper = (args: string[] = ["sleep", "3600"]): Resource => ({
  kind: "container",
  name: "sleeper",
  image: "docker.io/library/busybox:1.36",
  engine: "docker",
  args,
});

describe("agent container - engine availability", () => {
  it.skipIf(!dockerCli || dockerDaemon)(
    "agent container - with the docker CLI but no daemon answering, a container fails transiently (EngineUnavailable)",
    async () => {
      const { result, report } = await box.agent().apply(bundle({ resources: [sleeper()] }));
      expect(result).toMatchObject({
        outcome: "failed",
        failureClass: "transient",
        reason: "EngineUnavailable",
      });
      expect(result.resources[0]!.evidence).toContain("Cannot connect to the Docker daemon");
      expect(report.instances[0]!.resources[0]).toMatchObject({
        status: "waiting",
        reason: "EngineUnavailable",
      });
    },
  );

  it.skipIf(podmanCli)(
    "agent container - an engine that is not installed fails permanently (ToolMissing)",
    async () => {
      const { result } = await box
        .agent()
        .apply(bundle({ resources: [{ ...sleeper(), engine: "podman" } as Resource] }));
      expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "ToolMissing" });
      expect(result.resources[0]!.message).toContain("podman");
    },
  );

  it("agent container - engine errors are classified: missing image permanent, unreachable registry transient", () => {
    const run = (stderr: string) => ({
      exitCode: 1,
      signal: null,
      stdout: "",
      stderr,
      timedOut: false,
      durationMs: 1,
    });
    const cases: [string, string, string][] = [
      [
        "Error response from daemon: manifest for docker.io/library/nginx:9.9 not found: manifest unknown: manifest unknown",
        "ImageNotFound",
        "permanent",
      ],
      [
        "Error response from daemon: pull access denied for nosuch/image, repository does not exist or may require 'docker login'",
        "ImageNotFound",
        "permanent",
      ],
      [
        'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host',
        "RegistryUnreachable",
        "transient",
      ],
      [
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
        "EngineUnavailable",
        "transient",
      ],
      [
        "Error response from daemon: unauthorized: authentication required",
        "RegistryAuthFailed",
        "permanent",
      ],
    ];
    for (const [stderr, reason, failureClass] of cases)
      expect(engineFailure("docker pull", run(stderr))).toMatchObject({ reason, failureClass });
    expect(pinnedDigest(`nginx@sha256:${"a".repeat(64)}`)).toBe(`sha256:${"a".repeat(64)}`);
    expect(pinnedDigest("nginx:1.27")).toBeUndefined();
    expect(containerName("edge-proxy", "web/front")).toBe("steward-edge-proxy-web_front");
  });
});

describe("agent container - with a running engine", () => {
  it.skipIf(!dockerDaemon)(
    "agent container - (needs a docker daemon; none answers here) absent → running with its image digest observed, killed → started again, changed → replaced",
    async () => {
      const agent = box.agent();
      const attempt = bundle({ resources: [sleeper()] });
      const first = await agent.apply(attempt);
      expect(first.result.resources[0]!.action).toBe("created");
      const observed = first.report.instances[0]!.resources[0]!.observed as {
        running: boolean;
        imageId: string;
        repoDigests: string[];
      };
      expect(observed.running).toBe(true);
      expect(observed.imageId).toMatch(/^sha256:/);
      expect(observed.repoDigests.some((d) => d.includes("@sha256:"))).toBe(true);

      spawnSync("docker", ["kill", containerName("demo", "sleeper")]);
      const drifted = await agent.observe();
      expect(drifted.instances[0]!.resources[0]!.status).toBe("drifted");
      const healed = await agent.apply(again(attempt));
      expect(healed.result.resources[0]!.action).toBe("started");

      const changed = await agent.apply(bundle({ resources: [sleeper(["sleep", "7200"])], generation: 2 }));
      expect(changed.result.resources[0]!.action).toBe("updated");
      const stopped = await agent.apply(
        bundle({ resources: [sleeper(["sleep", "7200"])], generation: 3, state: "stopped" }),
      );
      expect(stopped.result.resources[0]!.action).toBe("stopped");
    },
  );

  it.skipIf(!dockerDaemon)(
    "agent container - (needs a docker daemon; none answers here) an image digest that does not exist fails permanently",
    async () => {
      const { result } = await box.agent().apply(
        bundle({
          resources: [
            { ...sleeper(), image: `docker.io/library/busybox@sha256:${"0".repeat(64)}` } as Resource,
          ],
        }),
      );
      expect(result).toMatchObject({ failureClass: "permanent", reason: "ImageNotFound" });
    },
  );
});
