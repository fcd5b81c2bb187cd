/**
 * The agent and secrets: a bundle carries ciphertext only, the agent decrypts it with the host's own
 * identity (made by `steward agent identity`), and nothing the agent sends back, logs or records
 * outside the host's files holds the plaintext or its base64.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { armor, Decrypter } from "age-encryption";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decryptionsSoFar } from "../../src/agent/host-key.js";
import { identityFiles } from "../../src/agent/identity.js";
import { contentHash } from "../../src/model/canonical.js";
import type { AgentReply, Resource, ResourceReport } from "../../src/model/generated.js";
import { encryptFor, filesBelow, leaks, newIdentity, traces } from "../helpers/secrets.js";
import { again, type Sandbox, sandbox, sandboxWithIdentity, secretBundle } from "./helpers.js";

let box: Sandbox;
let recipient: string;
beforeEach(async () => {
  ({ box, recipient } = await sandboxWithIdentity());
});
afterEach(async () => {
  await box.close();
});

const KEY =
  "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSecretKeyMaterialForTests\n-----END PRIVATE KEY-----\n";
const PASSWORD = "correct-horse-battery-staple";

const keyFile: Resource = {
  kind: "file",
  name: "tls-key",
  path: "/etc/demo/server.key",
  mode: "0600",
  source: "secrets/server.key.age",
  secret: true,
};

function outcome(reply: AgentReply, name: string) {
  return reply.result.resources.find((r) => r.name === name)!;
}

function reported(reply: AgentReply, name: string): ResourceReport {
  return reply.report.instances[0]!.resources.find((r) => r.name === name)!;
}

/** Everything the agent sends or keeps about the instance outside the files it manages. */
function agentRecords(reply: AgentReply): { name: string; bytes: Buffer | string }[] {
  return [
    { name: "result", bytes: JSON.stringify(reply.result) },
    { name: "report", bytes: JSON.stringify(reply.report) },
    // The state directory, but the host's own identity and the files a command wrote as its output.
    ...filesBelow(box.state).filter((f) => !f.name.includes("/identity/") && !f.name.includes("/runs/")),
  ];
}

describe("agent secrets - decrypted on the host only", () => {
  it("agent secrets - a secret file is decrypted with the host's identity and written with its mode; result, report and records carry neither its plaintext nor its base64, and its observed hash is keyed by the host", async () => {
    const ciphertext = await encryptFor(KEY, [recipient]);
    const sent = secretBundle({ resources: [keyFile] }, { "secrets/server.key.age": ciphertext });
    expect(leaks(traces(KEY), [{ name: "bundle", bytes: JSON.stringify(sent) }])).toEqual([]);
    const reply = await box.agent().apply(sent);
    expect(reply.result.outcome).toBe("succeeded");
    expect(outcome(reply, "tls-key").action).toBe("created");
    expect(readFileSync(box.host("/etc/demo/server.key"), "utf8")).toBe(KEY);
    expect(statSync(box.host("/etc/demo/server.key")).mode & 0o777).toBe(0o600);
    const observed = reported(reply, "tls-key").observed as { hash: string };
    expect(Object.keys(observed).sort()).toEqual(["exists", "hash", "ownership", "type"]);
    expect(observed.hash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(observed.hash).not.toContain(contentHash(KEY).slice(7));
    expect(reply.report.instances[0]!.converged).toBe(true);
    expect(leaks(traces(KEY), agentRecords(reply))).toEqual([]);
  });

  it("agent secrets - the same ciphertext and file again decrypt nothing; drift is healed by decrypting again", async () => {
    const sent = secretBundle(
      { resources: [keyFile] },
      { "secrets/server.key.age": await encryptFor(KEY, [recipient]) },
    );
    const agent = box.agent();
    await agent.apply(sent);
    const before = decryptionsSoFar();
    const noop = await agent.apply(again(sent));
    expect(outcome(noop, "tls-key").action).toBe("unchanged");
    expect(decryptionsSoFar()).toBe(before);
    const observed = await agent.observe();
    expect(observed.instances[0]!.converged).toBe(true);
    expect(decryptionsSoFar()).toBe(before);
    // A hand edit is drift: the ordinary path decrypts and writes the secret again.
    await import("node:fs").then((fs) =>
      fs.writeFileSync(box.host("/etc/demo/server.key"), "edited by hand\n"),
    );
    const healed = await agent.apply(again(sent));
    expect(outcome(healed, "tls-key").action).toBe("updated");
    expect(readFileSync(box.host("/etc/demo/server.key"), "utf8")).toBe(KEY);
  });

  it("agent secrets - a secret encrypted again for more recipients is a new generation that changes nothing on the host: the file stays, the service keeps its process, restartOn does not fire, a creates-guarded command does not run; an unguarded one runs again", async () => {
    const other = await newIdentity();
    const map = `password: ${PASSWORD}\n`;
    const resources: Resource[] = [
      { kind: "directory", path: "/srv" },
      keyFile,
      {
        kind: "service",
        name: "db",
        exec: ["sh", "-c", "echo started; exec sleep 1000"],
        env: { DB_PASSWORD: { secret: "secrets/db.yaml.age", key: "password" } },
        restartOn: ["tls-key"],
        dependsOn: ["tls-key"],
      },
      {
        kind: "command",
        name: "guarded",
        run: ["sh", "-c", 'echo once >> "$STEWARD_ROOT/srv/guarded"'],
        creates: "/srv/guarded",
        env: { DB_PASSWORD: { secret: "secrets/db.yaml.age", key: "password" } },
        dependsOn: ["/srv"],
      },
      {
        kind: "command",
        name: "plain",
        run: ["sh", "-c", 'echo run >> "$STEWARD_ROOT/srv/plain"'],
        dependsOn: ["/srv"],
      },
    ];
    const agent = box.agent();
    const first = await agent.apply(
      secretBundle(
        { resources, generation: 1 },
        {
          "secrets/server.key.age": await encryptFor(KEY, [recipient]),
          "secrets/db.yaml.age": await encryptFor(map, [recipient]),
        },
      ),
    );
    expect(first.result.outcome).toBe("succeeded");
    const pid = (reported(first, "db").observed as { pid: number }).pid;
    const key = statSync(box.host("/etc/demo/server.key"));
    const before = decryptionsSoFar();
    const reencrypted = secretBundle(
      { resources, generation: 2 },
      {
        "secrets/server.key.age": await encryptFor(KEY, [recipient, other.recipient]),
        "secrets/db.yaml.age": await encryptFor(map, [recipient, other.recipient]),
      },
    );
    const second = await agent.apply(reencrypted);
    expect(second.result.outcome).toBe("succeeded");
    expect(second.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["/srv", "unchanged"],
      ["tls-key", "unchanged"],
      ["db", "unchanged"],
      ["guarded", "skipped"],
      ["plain", "ran"],
    ]);
    // Each new ciphertext was opened once, to learn that its plaintext is the same.
    expect(decryptionsSoFar() - before).toBe(2);
    expect((reported(second, "db").observed as { pid: number }).pid).toBe(pid);
    const after = statSync(box.host("/etc/demo/server.key"));
    expect([after.ino, after.mtimeMs]).toEqual([key.ino, key.mtimeMs]);
    expect(readFileSync(box.host("/srv/guarded"), "utf8")).toBe("once\n");
    expect(readFileSync(box.host("/srv/plain"), "utf8")).toBe("run\nrun\n");
  });

  it("agent secrets - a rotated secret rewrites the file and restarts what takes it; the replaced content is kept sealed for the host alone", async () => {
    const resources: Resource[] = [
      keyFile,
      {
        kind: "service",
        name: "db",
        exec: ["sh", "-c", "exec sleep 1000"],
        env: { DB_PASSWORD: { secret: "secrets/db.yaml.age", key: "password" } },
        dependsOn: ["tls-key"],
      },
    ];
    const agent = box.agent();
    const first = await agent.apply(
      secretBundle(
        { resources, generation: 1 },
        {
          "secrets/server.key.age": await encryptFor(KEY, [recipient]),
          "secrets/db.yaml.age": await encryptFor(`password: ${PASSWORD}\n`, [recipient]),
        },
      ),
    );
    const pid = (reported(first, "db").observed as { pid: number }).pid;
    // A hand edit first: content no generation declared, which a rewrite must keep.
    await import("node:fs").then((fs) =>
      fs.writeFileSync(box.host("/etc/demo/server.key"), `${KEY}# local note\n`),
    );
    const rotatedKey = KEY.replace("SecretKeyMaterial", "RotatedKeyMaterial");
    const second = await agent.apply(
      secretBundle(
        { resources, generation: 2 },
        {
          "secrets/server.key.age": await encryptFor(rotatedKey, [recipient]),
          "secrets/db.yaml.age": await encryptFor("password: rotated-password-value\n", [recipient]),
        },
      ),
    );
    expect(second.result.outcome).toBe("succeeded");
    expect(readFileSync(box.host("/etc/demo/server.key"), "utf8")).toBe(rotatedKey);
    expect(outcome(second, "db").action).toBe("restarted");
    expect((reported(second, "db").observed as { pid: number }).pid).not.toBe(pid);
    expect(outcome(second, "tls-key").message).toMatch(
      /previous content kept at .*\.age, encrypted for this host's own age identity/,
    );
    const kept = readdirSync(join(box.state, "kept"));
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatch(/^[0-9a-f]{64}\.age$/);
    const sealed = readFileSync(join(box.state, "kept", kept[0]!), "utf8");
    expect(leaks(traces(KEY), [{ name: "kept", bytes: sealed }])).toEqual([]);
    const decrypter = new Decrypter();
    decrypter.addIdentity(readFileSync(identityFiles(box.state).age, "utf8").trim());
    expect(await decrypter.decrypt(armor.decode(sealed), "text")).toBe(`${KEY}# local note\n`);
  });

  it("agent secrets - a failing command's output is masked: the secret value and its base64 in the result, the report, its evidence and the agent's records", async () => {
    const resources: Resource[] = [
      keyFile,
      {
        kind: "command",
        name: "migrate",
        run: [
          "sh",
          "-c",
          'echo "connecting with $DB_PASSWORD"; printf %s "$DB_PASSWORD" | base64; cat "$STEWARD_ROOT/etc/demo/server.key" >&2; exit 3',
        ],
        env: { DB_PASSWORD: { secret: "secrets/db.yaml.age", key: "password" } },
        dependsOn: ["tls-key"],
      },
    ];
    const agent = box.agent();
    const reply = await agent.apply(
      secretBundle(
        { resources },
        {
          "secrets/server.key.age": await encryptFor(KEY, [recipient]),
          "secrets/db.yaml.age": await encryptFor(`password: ${PASSWORD}\nother: unused-value\n`, [
            recipient,
          ]),
        },
      ),
    );
    const failed = outcome(reply, "migrate");
    expect(failed.action).toBe("failed");
    expect(failed.reason).toBe("CommandFailed");
    expect(failed.evidence).toContain("connecting with [secret]");
    expect(failed.evidence).toContain("[secret]");
    const report = await agent.observe();
    const needles = [...traces(PASSWORD), ...traces(KEY)];
    expect(
      leaks(needles, [...agentRecords(reply), { name: "observe", bytes: JSON.stringify(report) }]),
    ).toEqual([]);
  });

  it("agent secrets - a host whose identity is not among the recipients fails the resources that use the secret permanently, naming it and steward secret update; nothing is written", async () => {
    const stranger = await newIdentity();
    const reply = await box.agent().apply(
      secretBundle(
        {
          resources: [keyFile, { kind: "file", name: "plain", path: "/etc/demo/plain", content: "ok\n" }],
        },
        { "secrets/server.key.age": await encryptFor(KEY, [stranger.recipient]) },
      ),
    );
    expect(reply.result.outcome).toBe("failed");
    expect(reply.result.failureClass).toBe("permanent");
    expect(reply.result.reason).toBe("SecretNotForThisHost");
    const failed = outcome(reply, "tls-key");
    expect(failed).toMatchObject({
      action: "failed",
      failureClass: "permanent",
      reason: "SecretNotForThisHost",
    });
    expect(failed.message).toContain(
      "secret secrets/server.key.age is not encrypted for this host's identity",
    );
    expect(failed.message).toContain(recipient);
    expect(failed.message).toContain("steward secret update secrets/server.key.age");
    expect(outcome(reply, "plain").action).toBe("created");
    expect(() => statSync(box.host("/etc/demo/server.key"))).toThrow();
    expect(reported(reply, "tls-key")).toMatchObject({ status: "failed", reason: "SecretNotForThisHost" });
  });

  it("agent secrets - a host without an identity fails permanently, naming steward agent identity", async () => {
    const bare = sandbox();
    try {
      const reply = await bare
        .agent()
        .apply(
          secretBundle(
            { resources: [keyFile] },
            { "secrets/server.key.age": await encryptFor(KEY, [recipient]) },
          ),
        );
      expect(outcome(reply, "tls-key")).toMatchObject({
        action: "failed",
        failureClass: "permanent",
        reason: "NoHostIdentity",
      });
      expect(outcome(reply, "tls-key").message).toContain("run steward agent identity on this host");
    } finally {
      await bare.close();
    }
  });

  it("agent secrets - a key the decrypted map does not have fails the resource permanently, naming the key", async () => {
    const reply = await box.agent().apply(
      secretBundle(
        {
          resources: [
            {
              kind: "command",
              name: "uses",
              run: ["true"],
              env: { X: { secret: "secrets/db.yaml.age", key: "passwrd" } },
            },
          ],
        },
        { "secrets/db.yaml.age": await encryptFor(`password: ${PASSWORD}\n`, [recipient]) },
      ),
    );
    expect(outcome(reply, "uses")).toMatchObject({
      action: "failed",
      failureClass: "permanent",
      reason: "SecretKeyMissing",
    });
    expect(outcome(reply, "uses").message).toContain('no key "passwrd"');
    expect(outcome(reply, "uses").message).toContain('"password"');
    expect(leaks(traces(PASSWORD), agentRecords(reply))).toEqual([]);
  });
});
