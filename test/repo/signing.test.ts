import { readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { SyncOutcome } from "../../src/repo/syncer.js";
import { removeTempDirs } from "../helpers/git.js";
import { assignmentYaml, fleetYaml, smallFleet } from "./fleet.js";
import { type Harness, harness } from "./harness.js";
import { openPgpKey, type SigningKey, sshKey } from "./keys.js";

function signedFleet(trusted: { name: string; key: string }[]): Record<string, string> {
  const list = trusted
    .map(({ name, key }) => `  - name: ${name}\n    key: ${JSON.stringify(key)}`)
    .join("\n");
  return { ...smallFleet(), "steward.yaml": fleetYaml(`signing:\n  required: true\n  trusted:\n${list}`) };
}

function invalidReason(outcome: SyncOutcome): string {
  if (outcome.kind !== "invalid") throw new Error(`expected invalid, got ${outcome.kind}`);
  const diagnostic = outcome.diagnostics.find((d) => d.code.startsWith("signing/"));
  return `${diagnostic?.code}: ${diagnostic?.message}`;
}

const dbChange = (content: string) => ({
  "assignments/db.yaml": assignmentYaml("db", { nodes: ["db-1"], content }),
});

describe("signing", () => {
  let h: Harness;
  const keys: SigningKey[] = [];
  afterEach(async () => {
    await h?.close();
  });
  afterAll(() => {
    for (const key of keys) key.dispose();
    removeTempDirs();
  });

  /** A harness whose first commit (the policy) is signed by `signer`. */
  async function signedHarness(trusted: SigningKey[], signer: SigningKey): Promise<Harness> {
    const files = signedFleet(trusted.map((k, i) => ({ name: `key-${i}`, key: k.publicKey })));
    const made = await harness("path", { "README.md": "fleet\n" });
    made.repo.commit("signed policy", files, { sign: true, config: signer.config, env: signer.env });
    return made;
  }

  it.each(["ed25519", "ecdsa", "rsa"] as const)(
    "signing - a head signed by a trusted SSH %s key is applied",
    async (type) => {
      const key = sshKey(type);
      h = await signedHarness([key], key);
      const outcome = await h.syncer.sync();
      expect(outcome).toMatchObject({ kind: "applied", signer: "key-0" });
    },
  );

  it("signing - an unsigned head is an invalid revision with a clear reason, and nothing advances", async () => {
    const key = sshKey();
    h = await signedHarness([key], key);
    const good = h.repo.rev();
    await h.syncer.sync();
    const unsigned = h.repo.commit("unsigned change", dbChange("db v2\n"));
    const outcome = await h.syncer.sync();
    expect(invalidReason(outcome)).toBe(
      `signing/unsigned: commit ${unsigned.slice(0, 12)} is not signed, and steward.yaml requires signed commits (spec.signing.required)`,
    );
    expect((await h.store.currentInstances()).get("db@db-1")).toMatchObject({ generation: 1 });
    expect(await h.store.syncState("main")).toMatchObject({ head: unsigned, lastGood: good });
    expect(await h.store.revision(unsigned)).toMatchObject({ outcome: "invalid" });

    h.repo.commit("signed fix", dbChange("db v3\n"), { sign: true, config: key.config });
    expect(await h.syncer.sync()).toMatchObject({
      kind: "applied",
      generations: [{ instanceKey: "db@db-1", generation: 2 }],
    });
  });

  it("signing - a head signed by an untrusted SSH key is refused, naming the key", async () => {
    const trusted = sshKey();
    const stranger = sshKey();
    h = await signedHarness([trusted], trusted);
    await h.syncer.sync();
    h.repo.commit("signed by a stranger", dbChange("db v2\n"), { sign: true, config: stranger.config });
    const reason = invalidReason(await h.syncer.sync());
    expect(reason).toMatch(
      /^signing\/untrusted: commit [0-9a-f]{12} is signed by SSH key SHA256:\S+, which is not in spec\.signing\.trusted$/,
    );
  });

  it("signing - a commit cannot switch the policy off on itself", async () => {
    const key = sshKey();
    h = await signedHarness([key], key);
    await h.syncer.sync();
    h.repo.commit("drop signing, unsigned", { "steward.yaml": fleetYaml() });
    expect(invalidReason(await h.syncer.sync())).toMatch(/^signing\/unsigned:/);
    h.repo.commit("drop signing, signed", {}, { sign: true, config: key.config, allowEmpty: true });
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied" });
    h.repo.commit("unsigned is fine now", dbChange("db v2\n"));
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied" });
  });

  it("signing - a steward.yaml that is a symlink keeps its policy in force for the next commit", async () => {
    const key = sshKey();
    h = await signedHarness([key], key);
    await h.syncer.sync();
    const policy = readFileSync(join(h.repo.dir, "steward.yaml"), "utf8");
    h.repo.write({ "steward.yaml": null, "config/fleet.yaml": policy });
    symlinkSync("config/fleet.yaml", join(h.repo.dir, "steward.yaml"));
    h.repo.commit("the policy behind a link, signed", {}, { sign: true, config: key.config });
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", signer: "key-0" });
    // The link stays; what it leads to drops signing, unsigned: the last good policy still holds.
    h.repo.commit("drop signing behind the link, unsigned", { "config/fleet.yaml": fleetYaml() });
    expect(invalidReason(await h.syncer.sync())).toMatch(/^signing\/unsigned:/);
  });

  it("signing - a signature moved onto other content does not verify", async () => {
    const key = sshKey();
    h = await signedHarness([key], key);
    await h.syncer.sync();
    const signed = h.repo.commit("signed change", dbChange("db v2\n"), { sign: true, config: key.config });
    // Same headers and signature, different message: a forged commit written with git hash-object.
    const raw = `${h.repo.git("cat-file", "commit", signed)}\n`;
    const tampered = h.repo.gitWithInput(
      raw.replace("signed change", "forged change"),
      "hash-object",
      "-t",
      "commit",
      "-w",
      "--stdin",
    );
    expect(tampered).not.toBe(signed);
    h.repo.git("update-ref", "refs/heads/main", tampered);
    expect(invalidReason(await h.syncer.sync())).toMatch(
      /^signing\/untrusted: commit [0-9a-f]{12}: the SSH signature does not match the commit$/,
    );
  });

  it("signing - OpenPGP: a head signed by a trusted key is applied, another key is refused", async () => {
    const trusted = await openPgpKey("Trusted Signer");
    const other = await openPgpKey("Someone Else");
    keys.push(trusted, other);
    h = await signedHarness([trusted], trusted);
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", signer: "key-0" });
    h.repo.commit("signed by another key", dbChange("db v2\n"), {
      sign: true,
      config: other.config,
      env: other.env,
    });
    expect(invalidReason(await h.syncer.sync())).toMatch(
      /^signing\/untrusted: commit [0-9a-f]{12} is signed by OpenPGP key [0-9A-F]{16}, which does not verify against spec\.signing\.trusted$/,
    );
    h.repo.commit("signed again", dbChange("db v3\n"), {
      sign: true,
      config: trusted.config,
      env: trusted.env,
    });
    expect(await h.syncer.sync()).toMatchObject({ kind: "applied", signer: "key-0" });
  });
});
