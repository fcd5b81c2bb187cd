import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { identityFiles } from "../../../src/agent/identity.js";
import { DEMO_IDENTITIES } from "../../../src/cli/demo-identities.js";
import { directorySource, loadRepo } from "../../../src/model/load.js";
import { bundleFor, type DesiredState } from "../../../src/model/render.js";
import { type LocalFleet, startLocalFleet } from "../../../src/transport/nats/fleet.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { killServices } from "../../agent/helpers.js";
import { exampleRepoOnFreePorts } from "../../helpers/example-repo.js";
import { recordEvents } from "../../helpers/transport-events.js";

const NODES = ["db-1", "web-1", "web-2"];

describe("nats fleet - agent processes on one machine converge the example repo over NATS", () => {
  let dir: string;
  let fleet: LocalFleet | undefined;
  let hub: NatsTransport | undefined;
  let desired: DesiredState;
  const ports = new Map<string, number>();
  const recorded = recordEvents();

  beforeAll(async () => {
    // The agents run as `steward` processes, from the compiled package.
    execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: resolve("."), stdio: "inherit" });
    dir = mkdtempSync(join(tmpdir(), "steward-nats-fleet-"));
    const repo = join(dir, "repo");
    for (const [node, port] of await exampleRepoOnFreePorts(repo)) ports.set(node, port);
    const loaded = await loadRepo(directorySource(repo));
    expect(loaded.ok).toBe(true);
    desired = loaded.desired as DesiredState;
    const output: string[] = [];
    fleet = await startLocalFleet({
      dir: join(dir, "fleet"),
      nodes: NODES,
      routeAs: "local",
      heartbeatIntervalMs: 500,
      onOutput: (node, line) => output.push(`${node}: ${line}`),
      onExit: (node, code) => output.push(`${node} exited with ${code}`),
    });
    hub = createNatsTransport(fleet.hubOptions());
    await hub.start(recorded.events);
    // db-1's secrets are encrypted for its demo identity (examples/identities), as steward up installs it.
    const identity = identityFiles(fleet.agents.get("db-1")!.state);
    mkdirSync(identity.dir, { recursive: true, mode: 0o700 });
    copyFileSync(join(DEMO_IDENTITIES, "db-1.key"), identity.age);
    chmodSync(identity.age, 0o600);
  }, 120_000);

  afterAll(async () => {
    await hub?.stop();
    await fleet?.stop();
    for (const agent of fleet?.agents.values() ?? []) killServices(agent.state);
    rmSync(dir, { recursive: true, force: true });
  });

  const converged = (assignment: string, node: string) =>
    recorded.reports.some(
      (r) =>
        r.node === node &&
        r.instances.some((i) => i.assignment === assignment && i.generation === 1 && i.converged),
    );

  it("nats fleet - every instance on the NATS nodes converges, services answer with the declared version", async () => {
    const instances = [...desired.instances.values()].filter((i) => NODES.includes(i.node));
    expect(instances.map((i) => i.key).sort()).toEqual([
      "base@db-1",
      "base@web-1",
      "base@web-2",
      "db@db-1",
      "web@web-1",
      "web@web-2",
    ]);
    const dispatch = async (assignment: string) => {
      for (const instance of instances.filter((i) => i.assignment === assignment)) {
        const node = desired.nodes.get(instance.node)?.value;
        if (!node) throw new Error(`no node ${instance.node}`);
        // The example declares these nodes `local`; this fleet stands in for them over NATS.
        await hub?.dispatch(bundleFor(instance, 1, ulid(), new Date()), node);
      }
    };
    // The hub orders by dependsOn; here the test does: base first, then what depends on it.
    await dispatch("base");
    await recorded.until(() => NODES.every((node) => converged("base", node)), "base converged", 60_000);
    await dispatch("db");
    await dispatch("web");
    await recorded.until(
      () => instances.every((i) => converged(i.assignment, i.node)),
      "every instance converged",
      60_000,
    );
    for (const [node, port] of ports) {
      const response = await fetch(`http://127.0.0.1:${port}/version`);
      expect(await response.text(), node).toContain("1.4.2");
    }
    expect(recorded.results.every((r) => r.outcome === "succeeded")).toBe(true);
    // Each agent wrote into its own root.
    const db = fleet?.agents.get("db-1");
    expect(readFileSync(join(db?.root ?? "", "var/lib/db/schema-version"), "utf8")).toContain(
      "migrated to 7",
    );
  }, 120_000);
});
