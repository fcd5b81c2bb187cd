import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { type NatsAgent, runNatsAgent } from "../../../src/transport/nats/agent.js";
import { createNatsTransport, type NatsTransport } from "../../../src/transport/nats/hub.js";
import { MarkerAgent, natsNode, testBundle } from "../../helpers/marker-agent.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { recordEvents } from "../../helpers/transport-events.js";

/** A CA and a certificate for 127.0.0.1 (and localhost, the name the client checks for it), made with openssl. */
function makePki(dir: string): { ca: string; cert: string; key: string } {
  const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  run(
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=steward test CA",
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
  );
  writeFileSync(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  run(
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    "server.key",
    "-out",
    "server.csr",
  );
  run(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    "san.ext",
    "-out",
    "server.crt",
  );
  return { ca: join(dir, "ca.crt"), cert: join(dir, "server.crt"), key: join(dir, "server.key") };
}

describe("nats TLS - the server's TLS files go into its configuration and clients verify it", () => {
  let dir: string;
  let server: TestNatsServer;
  let hub: NatsTransport;
  let agent: NatsAgent;
  let pki: { ca: string; cert: string; key: string };
  const recorded = recordEvents();
  const creds = (path: string) => join(dir, "bus", "credentials", path);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-nats-tls-"));
    pki = makePki(dir);
    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    const args = [
      "nats",
      "config",
      "--static",
      "--out",
      "bus",
      "--node",
      "web-1",
      "--tls-cert",
      pki.cert,
      "--tls-key",
      pki.key,
    ];
    expect(await main(args, io)).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
    hub = createNatsTransport({
      servers: server.url,
      creds: creds("hub.nk"),
      tls: { ca: pki.ca },
      nodes: ["web-1"],
    });
    await hub.start(recorded.events);
    agent = await runNatsAgent({
      servers: server.url,
      creds: creds("nodes/web-1.nk"),
      tls: { ca: pki.ca },
      node: "web-1",
      agent: new MarkerAgent("web-1", join(dir, "web-1")),
    });
  });

  afterAll(async () => {
    await agent?.stop();
    await hub?.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats TLS - hub and agent talk over TLS, verifying the server against the CA", async () => {
    expect(hub.connection.info?.tls_required).toBe(true);
    const bundle = testBundle("web-1", "web", 1);
    await hub.dispatch(bundle, natsNode("web-1"));
    await recorded.until(() => recorded.results.some((r) => r.attemptId === bundle.attemptId), "the result");
  });

  it("nats TLS - a client that does not trust the server's CA is refused with a one-line error", async () => {
    const other = mkdtempSync(join(tmpdir(), "steward-nats-tls-other-"));
    try {
      const stranger = makePki(other);
      const lonely = createNatsTransport({
        servers: server.url,
        creds: creds("hub.nk"),
        tls: { ca: stranger.ca },
      });
      await expect(lonely.start(recordEvents().events)).rejects.toThrow(
        /cannot connect to NATS at .* as hub:/,
      );
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
