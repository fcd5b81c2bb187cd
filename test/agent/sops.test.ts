/**
 * SOPS files with age recipients, decrypted by the agent as `sops decrypt` would, their MAC
 * verified. The fixtures are written from SOPS's published file format (test/helpers/sops.ts says
 * how); Debian ships no `sops` to make them with.
 */
import { existsSync, readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentReply, Resource } from "../../src/model/generated.js";
import { leaks, newIdentity, traces } from "../helpers/secrets.js";
import { sopsFile, sopsValue } from "../helpers/sops.js";
import { type Sandbox, sandboxWithIdentity, secretBundle } from "./helpers.js";

let box: Sandbox;
let recipient: string;
beforeEach(async () => {
  ({ box, recipient } = await sandboxWithIdentity());
});
afterEach(async () => {
  await box.close();
});

const PASSWORD = "sops-held-password-value";

/** A command that writes the value it was given, so the test can read what the host got. */
const writesPassword: Resource = {
  kind: "command",
  name: "write-password",
  run: [
    "sh",
    "-c",
    'mkdir -p "$STEWARD_ROOT/srv" && printf %s "$DB_PASSWORD" > "$STEWARD_ROOT/srv/password"',
  ],
  env: { DB_PASSWORD: { secret: "secrets/db.sops.yaml", key: "password" } },
};

function withSops(resources: Resource[], path: string, text: string) {
  return secretBundle({ resources }, { [path]: text });
}

function outcomeOf(reply: AgentReply, name: string) {
  return reply.result.resources.find((r) => r.name === name)!;
}

describe("sops - SOPS files encrypted for the host's age recipient", () => {
  it("sops - a YAML map's value reaches the command, its MAC verified; nothing of it in the result or report", async () => {
    const { text } = await sopsFile(
      { password: PASSWORD, port_unencrypted: 5432, nested: { flag: true, list: ["a", 2] } },
      [recipient],
    );
    expect(text).not.toContain(PASSWORD);
    const reply = await box.agent().apply(withSops([writesPassword], "secrets/db.sops.yaml", text));
    expect(reply.result.outcome).toBe("succeeded");
    expect(readFileSync(box.host("/srv/password"), "utf8")).toBe(PASSWORD);
    expect(leaks(traces(PASSWORD), [{ name: "reply", bytes: JSON.stringify(reply) }])).toEqual([]);
  });

  it("sops - a file in SOPS's binary format is a secret file's content", async () => {
    const key = "binary-format secret file content\nsecond line of it\n";
    const { text } = await sopsFile({ binary: key }, [recipient], "json");
    const reply = await box.agent().apply(
      withSops(
        [
          {
            kind: "file",
            name: "key",
            path: "/etc/demo/key",
            source: "secrets/key.sops.json",
            secret: true,
          },
        ],
        "secrets/key.sops.json",
        text,
      ),
    );
    expect(reply.result.outcome).toBe("succeeded");
    expect(readFileSync(box.host("/etc/demo/key"), "utf8")).toBe(key);
  });

  interface Tampering {
    name: string;
    /** Changes the file (it is given the data key: what only someone holding a recipient's identity has). */
    tamper: (text: string, dataKey: Buffer) => string;
    message: RegExp;
  }
  const tamperings: Tampering[] = [
    {
      name: "a value whose ciphertext was changed",
      tamper: (text) =>
        text.replace(
          /(password: ENC\[AES256_GCM,data:)(.)/,
          (_, head: string, c: string) => `${head}${c === "A" ? "B" : "A"}`,
        ),
      message: /the value at password does not decrypt with the file's data key/,
    },
    {
      name: "a value in the clear that was changed (the MAC covers it)",
      tamper: (text) => text.replace("port_unencrypted: 5432", "port_unencrypted: 6432"),
      message: /its MAC does not match its content/,
    },
    {
      name: "a value replaced by another one encrypted with the data key",
      tamper: (text, dataKey) =>
        text.replace(
          /password: ENC\[[^\]]*\]/,
          `password: ${sopsValue("attacker-chosen", dataKey, "password:")}`,
        ),
      message: /its MAC does not match its content/,
    },
    {
      name: "a MAC whose ciphertext was changed",
      tamper: (text) =>
        text.replace(
          /(mac: ENC\[AES256_GCM,data:)(.)/,
          (_, head: string, c: string) => `${head}${c === "A" ? "B" : "A"}`,
        ),
      message: /its MAC does not decrypt with the file's data key/,
    },
    {
      name: "a MAC forged for other content",
      tamper: (text, dataKey) => {
        const lastmodified = /lastmodified: "?([^"\n]+)"?/.exec(text)![1]!;
        return text.replace(
          /mac: ENC\[[^\]]*\]/,
          `mac: ${sopsValue("0".repeat(128), dataKey, lastmodified)}`,
        );
      },
      message: /its MAC does not match its content/,
    },
  ];

  for (const { name, tamper, message } of tamperings)
    it(`sops - ${name} is refused: a permanent failure, nothing written`, async () => {
      const { text, dataKey } = await sopsFile({ password: PASSWORD, port_unencrypted: 5432 }, [recipient]);
      const reply = await box
        .agent()
        .apply(withSops([writesPassword], "secrets/db.sops.yaml", tamper(text, dataKey)));
      const failed = outcomeOf(reply, "write-password");
      expect(failed).toMatchObject({ action: "failed", failureClass: "permanent", reason: "SecretTampered" });
      expect(failed.message).toMatch(message);
      expect(failed.message).toContain("secrets/db.sops.yaml");
      expect(existsSync(box.host("/srv/password"))).toBe(false);
    });

  it("sops - a file whose data key is for other recipients is not for this host: a permanent failure naming the fix", async () => {
    const other = await newIdentity();
    const { text } = await sopsFile({ password: PASSWORD }, [other.recipient]);
    const reply = await box.agent().apply(withSops([writesPassword], "secrets/db.sops.yaml", text));
    const failed = outcomeOf(reply, "write-password");
    expect(failed).toMatchObject({
      action: "failed",
      failureClass: "permanent",
      reason: "SecretNotForThisHost",
    });
    expect(failed.message).toContain("steward secret update secrets/db.sops.yaml");
  });
});
