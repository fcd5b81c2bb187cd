/**
 * The host's identity, made on the host: once, private parts 0600 in the state directory, only the
 * public part printed; the age key works with the real `age` CLI, and the nkey signs as NATS expects.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromPublic } from "@nats-io/nkeys";
import { afterEach, describe, expect, it } from "vitest";
import { ensureHostIdentity, identityFiles, readNkeySeed } from "../../src/agent/identity.js";
import { STEWARD_SCHEMA_ID, validatorFor } from "../../src/model/schema.js";
import { runCli } from "../helpers/cli.js";

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("agent identity", () => {
  it("agent identity - made once on the host, private parts 0600, only the public part printed", async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-identity-"));
    const state = join(dir, "state");
    const first = await runCli(["--state", state, "agent", "identity"], dir);
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/made this host's identity in .*identity \(private keys, mode 0600/);
    const files = identityFiles(state);
    expect(statSync(files.dir).mode & 0o777).toBe(0o700);
    for (const file of [files.nkey, files.age]) expect(statSync(file).mode & 0o777).toBe(0o600);
    const seed = readFileSync(files.nkey, "utf8").trim();
    const ageKey = readFileSync(files.age, "utf8").trim();
    expect(seed).toMatch(/^SU[A-Z2-7]{56}$/);
    expect(ageKey).toMatch(/^AGE-SECRET-KEY-1[0-9A-Z]+$/);
    // Nothing private is ever printed.
    for (const out of [first.stdout, first.stderr]) {
      expect(out).not.toContain(seed);
      expect(out).not.toContain(ageKey);
    }
    const json = await runCli(["--state", state, "agent", "identity", "-o", "json"], dir);
    const identity = JSON.parse(json.stdout) as { nkey: string; age: string };
    expect(json.stderr).toMatch(/kept this host's identity/);
    expect(first.stdout).toContain(`nkey: ${identity.nkey}`);
    expect(first.stdout).toContain(`age: ${identity.age}`);
    // Kept: the same identity every time, and what the Node schema accepts.
    expect((await ensureHostIdentity(state)).identity).toEqual(identity);
    expect(readNkeySeed(state)).toBe(seed);
    const node = {
      apiVersion: "steward.dev/v1",
      kind: "Node",
      metadata: { name: "edge-9" },
      spec: { transport: "nats", roots: ["/srv"], identity },
    };
    expect(validatorFor(STEWARD_SCHEMA_ID, "Node")(node)).toBe(true);
    expect(
      validatorFor(
        STEWARD_SCHEMA_ID,
        "Node",
      )({ ...node, spec: { ...node.spec, identity: { age: "age1nope" } } }),
    ).toBe(false);
    // The nkey is a NATS user key.
    expect(fromPublic(identity.nkey).getPublicKey()).toBe(identity.nkey);
  });

  it("agent identity - the age recipient is the real age CLI's: what age encrypts for it the host's key decrypts", async () => {
    dir = mkdtempSync(join(tmpdir(), "steward-identity-"));
    const { identity } = await ensureHostIdentity(dir);
    const sealed = execFileSync("age", ["-r", identity.age, "-a"], { input: "db password\n" });
    const opened = execFileSync("age", ["-d", "-i", identityFiles(dir).age], { input: sealed });
    expect(opened.toString()).toBe("db password\n");
  });
});
