import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readProcess } from "../../src/agent/proc.js";
import type { Bundle, Report, Resource, ServiceResource } from "../../src/model/generated.js";
import { again, bundle, eventually, freePort, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

const SERVER = `
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
const config = JSON.parse(readFileSync("config.json", "utf8"));
const server = createServer((request, response) => response.end(config.version + "\\n"));
server.listen(config.port, "127.0.0.1", () => console.log("serving " + config.version));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`;

function webResources(port: number, version: string, service: Partial<ServiceResource> = {}): Resource[] {
  return [
    { kind: "directory", name: "web-dir", path: "/srv/web" },
    { kind: "file", name: "web-program", path: "/srv/web/server.mjs", content: SERVER },
    {
      kind: "file",
      name: "web-config",
      path: "/srv/web/config.json",
      content: JSON.stringify({ port, version }),
    },
    {
      kind: "service",
      name: "web",
      exec: [process.execPath, "server.mjs"],
      cwd: "/srv/web",
      restartOn: ["web-config", "web-program"],
      dependsOn: ["web-config", "web-program"],
      ...service,
    },
  ];
}

async function get(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/`);
  return (await response.text()).trim();
}

function service(report: Report): NonNullable<Report["instances"][number]["resources"][number]> {
  return report.instances[0]!.resources.find((r) => r.kind === "service")!;
}

function pidOf(report: Report): number {
  return (service(report).observed as { pid: number }).pid;
}

describe("agent service", () => {
  it("agent service - a failed start's evidence is that process's output, not an earlier start's", async () => {
    const crashing = (message: string): Resource[] => [
      { kind: "directory", name: "dir", path: "/srv/crash" },
      {
        kind: "service",
        name: "crash",
        exec: ["sh", "-c", `echo "Error: ${message}" >&2; exit 1`],
        cwd: "/srv/crash",
      },
    ];
    const agent = box.agent();
    const first = await agent.apply(bundle({ resources: crashing("the first cause") }));
    expect(first.result.resources[1]!.evidence).toContain("Error: the first cause");
    const second = await agent.apply(bundle({ resources: crashing("the second cause"), generation: 2 }));
    const evidence = second.result.resources[1]!.evidence!;
    expect(evidence).toContain("Error: the second cause");
    expect(evidence).not.toContain("the first cause");
    expect(second.report.instances[0]!.resources[1]!.evidence).not.toContain("the first cause");
  });

  it("agent service - starts detached, reports the pid, and serves", async () => {
    const port = await freePort();
    const { result, report } = await box.agent().apply(bundle({ resources: webResources(port, "1.0.0") }));
    expect(result.outcome).toBe("succeeded");
    expect(result.resources[3]).toMatchObject({ name: "web", action: "started" });
    const observed = service(report);
    expect(observed.status).toBe("ok");
    expect(observed.observed).toMatchObject({ running: true, pid: expect.any(Number) });
    expect(report.instances[0]!.state).toBe("running");
    await eventually(() => get(port).catch(() => ""), 5000, "the server to answer");
    expect(await get(port)).toBe("1.0.0");
  });

  it("agent service - killed behind the agent's back, it is observed as not running and started again by apply", async () => {
    const port = await freePort();
    const agent = box.agent();
    const attempt = bundle({ resources: webResources(port, "1.0.0") });
    const first = await agent.apply(attempt);
    const pid = pidOf(first.report);
    process.kill(pid, "SIGKILL");
    const seen = await eventually(async () => {
      const report = await agent.observe();
      // The exit status arrives a moment after /proc shows the process gone.
      const seen = service(report);
      return seen.status === "drifted" && (seen.observed as { exit?: unknown }).exit ? report : undefined;
    });
    expect(service(seen).observed).toMatchObject({ running: false, exit: { signal: "SIGKILL" } });
    expect(service(seen).diff).toEqual([expect.stringContaining("not running")]);
    expect(service(seen).evidence).toContain("killed by SIGKILL");
    expect(seen.instances[0]!.converged).toBe(false);

    const healed = await agent.apply(again(attempt));
    expect(healed.result.resources[3], JSON.stringify(healed.result.resources[3])).toMatchObject({
      action: "started",
    });
    const newPid = pidOf(healed.report);
    expect(newPid).not.toBe(pid);
    expect(service(healed.report).status).toBe("ok");
    await eventually(() => get(port).catch(() => ""), 5000, "the server to answer again");
  });

  it("agent service - a changed restartOn file restarts it; an unchanged re-apply does not", async () => {
    const port = await freePort();
    const agent = box.agent();
    const first = await agent.apply(bundle({ resources: webResources(port, "1.0.0") }));
    const again1 = await agent.apply(again(bundle({ resources: webResources(port, "1.0.0") })));
    expect(again1.result.resources[3]!.action).toBe("unchanged");
    expect(pidOf(again1.report)).toBe(pidOf(first.report));
    const second = await agent.apply(bundle({ resources: webResources(port, "2.0.0"), generation: 2 }));
    expect(second.result.resources[3]).toMatchObject({ action: "restarted" });
    expect(pidOf(second.report)).not.toBe(pidOf(first.report));
    expect(readProcess(pidOf(first.report))).toBeUndefined();
    await eventually(async () => (await get(port).catch(() => "")) === "2.0.0", 5000, "version 2.0.0");
  });

  it("agent service - state stopped stops it (SIGTERM) and reports the instance stopped", async () => {
    const port = await freePort();
    const agent = box.agent();
    const first = await agent.apply(bundle({ resources: webResources(port, "1.0.0") }));
    const pid = pidOf(first.report);
    const stopped = await agent.apply(
      bundle({ resources: webResources(port, "1.0.0"), generation: 2, state: "stopped" }),
    );
    expect(stopped.result.resources[3]).toMatchObject({
      action: "stopped",
      message: expect.stringContaining("SIGTERM"),
    });
    expect(readProcess(pid)).toBeUndefined();
    expect(service(stopped.report)).toMatchObject({ status: "ok", observed: { running: false } });
    expect(stopped.report.instances[0]!.state).toBe("stopped");
  });

  it("agent service - a process that ignores SIGTERM is killed after stopTimeout", async () => {
    const agent = box.agent();
    const stubborn: Resource = {
      kind: "service",
      name: "stubborn",
      exec: ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"],
      stopTimeout: "300ms",
    };
    const first = await agent.apply(bundle({ resources: [stubborn] }));
    const pid = pidOf(first.report);
    const stopped = await agent.apply(bundle({ resources: [stubborn], generation: 2, state: "stopped" }));
    expect(stopped.result.resources[0]!.message).toContain("killed");
    expect(readProcess(pid)).toBeUndefined();
  });

  it("agent service - an executable that does not exist fails permanently", async () => {
    const { result } = await box
      .agent()
      .apply(bundle({ resources: [{ kind: "service", name: "ghost", exec: ["/nonexistent/daemon"] }] }));
    expect(result).toMatchObject({
      outcome: "failed",
      failureClass: "permanent",
      reason: "ExecutableNotFound",
    });
  });

  it("agent service - a service that exits at once fails transiently with its output as evidence", async () => {
    const { result, report } = await box.agent().apply(
      bundle({
        resources: [{ kind: "service", name: "crash", exec: ["sh", "-c", "echo cannot bind >&2; exit 3"] }],
      }),
    );
    expect(result.resources[0]).toMatchObject({ action: "failed", failureClass: "transient" });
    expect(result.resources[0]!.evidence).toContain("cannot bind");
    expect(result.reason).toBe("ServiceExited");
    expect(service(report)).toMatchObject({
      status: "waiting",
      counters: { consecutiveFailures: 1, everApplied: false },
    });
  });
});

describe("agent service - supervisor", () => {
  it("agent service - the supervisor restarts a killed service and sends a fresh report", async () => {
    const port = await freePort();
    const agent = box.agent({ supervisor: { tickMs: 50, reportIntervalMs: 60_000 } });
    const first = await agent.apply(bundle({ resources: webResources(port, "1.0.0") }));
    const pid = pidOf(first.report);
    const reports: Report[] = [];
    agent.start((report) => reports.push(report));
    await eventually(() => reports.length > 0, 5000, "the first report");
    process.kill(pid, "SIGKILL");
    const restarted = await eventually(
      () => reports.find((r) => service(r).status === "ok" && pidOf(r) !== pid),
      10_000,
      "a report with the restarted service",
    );
    expect(readProcess(pidOf(restarted))).toBeDefined();
    await agent.stop();
    // Stopping the supervisor leaves the service running: a restarted agent picks it up.
    expect(readProcess(pidOf(restarted))).toBeDefined();
  });

  it("agent service - a crash loop spends the budget and is reported stuck, applied then regressed", async () => {
    const agent = box.agent({
      supervisor: { tickMs: 20, backoffBaseMs: 20, backoffMaxMs: 40, reportIntervalMs: 60_000 },
    });
    const crashing: Bundle = bundle({
      budget: { attempts: 3, withinMs: 60_000 },
      resources: [{ kind: "service", name: "flappy", exec: ["sh", "-c", "sleep 0.4; exit 1"] }],
    });
    const first = await agent.apply(crashing);
    expect(first.result.outcome).toBe("succeeded");
    const reports: Report[] = [];
    agent.start((report) => reports.push(report));
    const stuck = await eventually(
      () => reports.find((r) => service(r).status === "stuck"),
      20_000,
      "the crash loop to be reported stuck",
    );
    expect(service(stuck)).toMatchObject({ reason: "ServiceExited", failureClass: "transient" });
    expect(service(stuck).counters.consecutiveFailures).toBeGreaterThanOrEqual(3);
    // It did start once (the first apply succeeded), so this is "applied, then regressed".
    expect(service(stuck).counters.everApplied).toBe(true);
  });
});
