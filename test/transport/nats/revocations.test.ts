/**
 * Revoking without a reload, on a real nats-server in operator mode (`steward nats config`): a user
 * JWT the hub signs for a new key connects at once with its node's permissions, and the account's
 * revocations — pushed as the system user, level-based — cut a revoked node off at once, keep what
 * the server already revoked when the hub forgot it, lift a key admitted again, change nothing when
 * there is nothing to change, and survive a server restart.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createUser } from "@nats-io/nkeys";
import { AuthorizationError, connect, jwtAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { type NatsIssuer, readNatsIssuer, signNodeUser } from "../../../src/transport/nats/operator.js";
import { AccountRevocations } from "../../../src/transport/nats/revocations.js";
import { identities, subjects } from "../../../src/transport/nats/subjects.js";
import { startNatsServer, type TestNatsServer } from "../../helpers/nats-server.js";
import { eventually } from "../../hub/helpers/process.js";

describe("nats revocations - a node's credentials, issued and revoked without a server reload", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-revoke-"));
  let server: TestNatsServer;
  let issuer: NatsIssuer;
  let pid: number | undefined;
  const revocations: AccountRevocations[] = [];
  const a = createUser();
  const b = createUser();
  /** As the hub revokes: up to the next second, so a JWT signed this second is covered too. */
  const now = () => Math.floor(Date.now() / 1000) + 1;

  /** Connects as `node` with a JWT the issuer signs now for `key` (or with `jwt`). */
  async function asNode(
    node: string,
    key: ReturnType<typeof createUser>,
    jwt?: string,
  ): Promise<NatsConnection> {
    return connect({
      servers: server.url,
      authenticator: jwtAuthenticator(
        jwt ?? (await signNodeUser(issuer, node, key.getPublicKey())),
        key.getSeed(),
      ),
      inboxPrefix: subjects.inboxPrefix(identities.node(node)),
      reconnect: false,
    });
  }
  const refusal = (attempt: Promise<NatsConnection>) =>
    attempt.then(
      async (nc) => {
        await nc.close();
        return "connected";
      },
      (error: unknown) => error,
    );
  async function keeper(): Promise<AccountRevocations> {
    const kept = new AccountRevocations({ servers: server.url, issuer });
    await kept.start();
    revocations.push(kept);
    return kept;
  }

  beforeAll(async () => {
    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--out", "bus"], io)).toBe(0);
    server = await startNatsServer({ configFile: join(dir, "bus", "nats-server.conf") });
    pid = server.process.pid;
    issuer = readNatsIssuer(join(dir, "bus", "credentials", "hub-issuer.json"));
    // JWTs count time in seconds, and a server that restarts prefers its preloaded account to an
    // update of the same second: let the configuration's second pass, as it does for any real hub.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
  });
  afterAll(async () => {
    for (const kept of revocations) await kept.stop();
    await server?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("nats revocations - a JWT signed for a new key connects at once, confined to its node's subjects", async () => {
    const nc = await asNode("node-a", a);
    const errors: string[] = [];
    const watch = (async () => {
      for await (const status of nc.status()) if (status.type === "error") errors.push(status.error.message);
    })();
    nc.subscribe(subjects.control("node-b"));
    nc.subscribe(subjects.control("node-a"));
    await eventually(() => errors.length > 0, 5_000, "a refusal");
    expect(errors).toEqual(['Permissions Violation for Subscription to "steward.control.node-b"']);
    await nc.close();
    await watch;
  });

  it("nats revocations - revoking a key cuts its connection off at once and refuses it after; others stay", async () => {
    const jwtA = await signNodeUser(issuer, "node-a", a.getPublicKey());
    const connectedA = await asNode("node-a", a, jwtA);
    const connectedB = await asNode("node-b", b);
    const closedA = connectedA.closed();
    const kept = await keeper();
    expect(
      await kept.apply({ revoke: new Map([[a.getPublicKey(), now()]]), admitted: new Set() }),
    ).toMatchObject({
      pushed: true,
      added: [a.getPublicKey()],
      revoked: [a.getPublicKey()],
    });
    expect(await closedA).toBeInstanceOf(Error);
    expect(await refusal(asNode("node-a", a, jwtA))).toBeInstanceOf(AuthorizationError);
    expect(connectedB.isClosed()).toBe(false);
    await connectedB.flush();
    // Nothing to change: nothing pushed.
    expect(
      await kept.apply({ revoke: new Map([[a.getPublicKey(), now()]]), admitted: new Set() }),
    ).toMatchObject({
      pushed: false,
    });
    await connectedB.close();
  });

  it("nats revocations - a hub that forgot a revocation keeps it; a key admitted again is lifted; a restart keeps them; no reload", async () => {
    const oldA = await signNodeUser(issuer, "node-a", a.getPublicKey());
    const forgetful = await keeper();
    expect(await forgetful.apply({ revoke: new Map(), admitted: new Set() })).toMatchObject({
      pushed: false,
      revoked: [a.getPublicKey()],
    });
    const jwtB = await signNodeUser(issuer, "node-b", b.getPublicKey());
    expect(
      await forgetful.apply({
        revoke: new Map([[b.getPublicKey(), now()]]),
        admitted: new Set([a.getPublicKey()]),
      }),
    ).toMatchObject({
      pushed: true,
      added: [b.getPublicKey()],
      lifted: [a.getPublicKey()],
      revoked: [b.getPublicKey()],
    });
    const back = await asNode("node-a", a, oldA);
    await back.close();
    expect(await refusal(asNode("node-b", b, jwtB))).toBeInstanceOf(AuthorizationError);
    for (const kept of revocations.splice(0)) await kept.stop();

    await server.restart();
    expect(await refusal(asNode("node-b", b, jwtB))).toBeInstanceOf(AuthorizationError);
    const afterRestart = await asNode("node-a", a, oldA);
    await afterRestart.close();
    // `steward nats config` run again (keys kept) preloads the account with what the server revoked.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const io = { stdout: () => {}, stderr: () => {}, env: {}, cwd: dir, isTty: false };
    expect(await main(["nats", "config", "--out", "bus"], io)).toBe(0);
    await server.restart();
    expect(await refusal(asNode("node-b", b, jwtB))).toBeInstanceOf(AuthorizationError);
    const stillA = await asNode("node-a", a, oldA);
    await stillA.close();
    // The account still has its limits: connections are taken (without them, none would be).
    expect(readFileSync(join(dir, "bus", "nats-server.conf"), "utf8")).toMatch(
      /^resolver: \{\n {2}type: full/m,
    );
    expect(server.process.log).not.toMatch(/[Rr]eload/);
    expect(pid).toBeDefined();
  });
});
