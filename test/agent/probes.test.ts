import { createServer, type Server } from "node:http";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Probe } from "../../src/model/generated.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
let server: Server | undefined;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
  await box.close();
});

/** A real HTTP server answering /version with whatever `version()` says at the time. */
async function versionServer(version: () => string): Promise<number> {
  server = createServer((request, response) => {
    if (request.url === "/version") response.end(`${version()}\n`);
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return (server!.address() as { port: number }).port;
}

const file = { kind: "file" as const, path: "/srv/marker", content: "x" };

describe("agent probes", () => {
  it("agent probes - a server that is up but serves another version fails its probe (correctness, not liveness)", async () => {
    let served = "1.4.1";
    const port = await versionServer(() => served);
    const probes: Probe[] = [
      {
        kind: "http",
        name: "serves-declared-version",
        url: `http://127.0.0.1:${port}/version`,
        expectBody: "1.4.2",
      },
      { kind: "tcp", name: "port-open", port: String(port) },
    ];
    const agent = box.agent({ probeSettleMs: 300 });
    const { result, report } = await agent.apply(bundle({ version: "1.4.2", resources: [file], probes }));
    expect(result).toMatchObject({ outcome: "failed", reason: "ProbeFailing", failureClass: "transient" });
    const [http, tcp] = report.instances[0]!.probes;
    expect(http).toMatchObject({ name: "serves-declared-version", ok: false });
    expect(http!.message).toContain('without "1.4.2"');
    expect(http!.evidence).toContain("1.4.1");
    expect(tcp).toMatchObject({ name: "port-open", ok: true });
    expect(report.instances[0]!.converged).toBe(false);
    // Every resource applied: the generation is applied, yet the instance has not converged.
    expect(report.instances[0]!.generation).toBe(1);

    served = "1.4.2";
    const fixed = await agent.observe();
    expect(fixed.instances[0]!.probes.map((p) => p.ok)).toEqual([true, true]);
    expect(fixed.instances[0]!.converged).toBe(true);
  });

  it("agent probes - an unexpected status and a closed port fail", async () => {
    const port = await versionServer(() => "x");
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
    const openPort = await versionServer(() => "x");
    const { report } = await box.agent({ probeSettleMs: 200 }).apply(
      bundle({
        resources: [file],
        probes: [
          { kind: "http", name: "missing-route", url: `http://127.0.0.1:${openPort}/nope` },
          { kind: "tcp", name: "closed", port },
        ],
      }),
    );
    const [status, closed] = report.instances[0]!.probes;
    expect(status).toMatchObject({
      ok: false,
      message: expect.stringContaining("answered 404, expected 200"),
    });
    expect(closed).toMatchObject({ ok: false, message: expect.stringContaining("ECONNREFUSED") });
  });

  it("agent probes - a command probe checks its output", async () => {
    const { result, report } = await box.agent({ probeSettleMs: 200 }).apply(
      bundle({
        resources: [file],
        probes: [
          {
            kind: "command",
            name: "has-marker",
            run: ["sh", "-c", 'cat "$STEWARD_ROOT/srv/marker"'],
            expectOutput: "x",
          },
          { kind: "command", name: "wrong", run: ["echo", "migrated to 6"], expectOutput: "migrated to 7" },
        ],
      }),
    );
    expect(report.instances[0]!.probes.map((p) => [p.name, p.ok])).toEqual([
      ["has-marker", true],
      ["wrong", false],
    ]);
    expect(result.message).toContain("probe wrong fails");
  });

  it("agent probes - a stopped instance promises nothing: its probes are not run", async () => {
    const { result, report } = await box.agent().apply(
      bundle({
        state: "stopped",
        resources: [file],
        probes: [{ kind: "tcp", name: "would-fail", port: 1 }],
      }),
    );
    expect(result.outcome).toBe("succeeded");
    expect(report.instances[0]!.probes).toEqual([]);
    expect(report.instances[0]!.converged).toBe(true);
  });
});
