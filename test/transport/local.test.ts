import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Agent } from "../../src/agent/agent.js";
import { DispatchError, type TransportEvents } from "../../src/hub/transport.js";
import type { AttemptResult, Bundle, Node, Report } from "../../src/model/generated.js";
import { LocalTransport } from "../../src/transport/local.js";
import { FakeClock } from "../hub/helpers/clock.js";

let dir: string;
let transport: LocalTransport;
let clock: FakeClock;
let heard: string[];
let results: AttemptResult[];
let reports: Report[];
let lost: string[];

const node = (name: string, transportName: "local" | "ssh" = "local"): Node => ({
  apiVersion: "steward.dev/v1",
  kind: "Node",
  metadata: { name },
  spec: { transport: transportName, roots: ["/srv"] },
});

let seq = 0;
const bundle = (nodeName: string, content: string, extra: Partial<Bundle["spec"]> = {}): Bundle => ({
  apiVersion: "steward.dev/v1",
  kind: "Bundle",
  attemptId: `01JATTEMPT${String(++seq).padStart(16, "0")}`,
  generation: seq,
  hash: `sha256:${seq}`,
  issuedAt: new Date().toISOString(),
  spec: {
    assignment: "app",
    node: nodeName,
    state: "running",
    dependsOn: [],
    roots: ["/srv"],
    resources: [{ kind: "file", name: "conf", path: "/srv/conf", content }],
    probes: [],
    ...extra,
  },
});

const events = (): TransportEvents => ({
  report: (report) => void reports.push(report),
  result: (result) => void results.push(result),
  heartbeat: (name) => void heard.push(name),
  lost: (attemptId, _node, reason) => void lost.push(`${attemptId}: ${reason}`),
  health: () => undefined,
});

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "steward-local-"));
  clock = new FakeClock();
  heard = [];
  results = [];
  reports = [];
  lost = [];
  transport = new LocalTransport({
    root: join(dir, "root"),
    stateDir: join(dir, "state"),
    clock,
    heartbeatIntervalMs: 10_000,
    agentFor: (name, paths, agentClock) =>
      new Agent({
        node: name,
        root: paths.root!,
        stateDir: paths.stateDir,
        clock: () => agentClock.now(),
        probeSettleMs: 0,
      }),
  });
  await transport.start(events());
});
afterEach(async () => {
  await transport.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("transport - local", () => {
  it("transport - applies each node's attempts in order under <root>/<node>, then reports result and a full report", async () => {
    const first = bundle("n1", "one");
    const second = bundle("n1", "two");
    await transport.dispatch(first, node("n1"));
    await transport.dispatch(second, node("n1"));
    await transport.dispatch(bundle("n2", "other"), node("n2"));
    await transport.settled();
    expect(results.filter((r) => r.node === "n1").map((r) => [r.attemptId, r.outcome])).toEqual([
      [first.attemptId, "succeeded"],
      [second.attemptId, "succeeded"],
    ]);
    expect(readFileSync(join(dir, "root", "n1", "srv", "conf"), "utf8")).toBe("two");
    expect(readFileSync(join(dir, "root", "n2", "srv", "conf"), "utf8")).toBe("other");
    expect(existsSync(join(dir, "state", "agents", "n1"))).toBe(true);
    // Every result is followed by a full report of its node showing what it applied (a supervision
    // report built earlier may arrive later: the newest is the one with the highest sequence).
    const lastOfN1 = reports
      .filter((r) => r.node === "n1")
      .sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0))
      .at(-1)!;
    expect(lastOfN1.instances).toMatchObject([
      { assignment: "app", generation: second.generation, converged: true },
    ]);
    expect(heard).toEqual(expect.arrayContaining(["n1", "n2"]));
  });

  it("transport - a stopped node refuses dispatches as transient and is silent; started again it registers", async () => {
    await transport.requestReport(node("n1"));
    await transport.settled();
    await transport.stopNode("n1");
    const before = heard.length;
    clock.advance(60_000);
    expect(heard.length).toBe(before);
    const error = await transport.dispatch(bundle("n1", "x"), node("n1")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DispatchError);
    expect(error).toMatchObject({ failureClass: "transient", reason: "NodeStopped" });
    reports.length = 0;
    await transport.startNode(node("n1"));
    await transport.settled();
    expect(heard.at(-1)).toBe("n1");
    expect(reports.map((r) => r.node)).toEqual(["n1"]);
  });

  it("transport - a bundle the agent refuses is a permanent failure; another transport's node is refused", async () => {
    const wrongNode = bundle("n1", "x");
    await transport.dispatch(wrongNode, node("n2"));
    await transport.settled();
    expect(results).toMatchObject([
      { attemptId: wrongNode.attemptId, outcome: "failed", failureClass: "permanent" },
    ]);
    expect(lost).toEqual([]);
    const error = await transport.dispatch(bundle("e1", "x"), node("e1", "ssh")).catch((e: unknown) => e);
    expect(error).toMatchObject({ failureClass: "permanent", reason: "WrongTransport" });
  });

  it("transport - heartbeats follow the interval while a node runs", async () => {
    await transport.requestReport(node("n1"));
    await transport.settled();
    const before = heard.filter((n) => n === "n1").length;
    clock.advance(30_000);
    expect(heard.filter((n) => n === "n1").length - before).toBe(3);
  });
});
