import { describe, expect, it } from "vitest";
import { assignmentYaml, file, nodes, shell } from "./helpers/fleet.js";
import { startHarness } from "./helpers/harness.js";

const KEY =
  "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";

describe("hub - logs", () => {
  it("hub - every log line about an attempt carries its attempt id, and no secret reaches logs or conditions", async () => {
    const lines: Record<string, unknown>[] = [];
    const h = await startHarness({
      logLines: lines,
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", {
          nodes: ["n1"],
          resources: [
            { kind: "directory", name: "srv", path: "/srv" },
            file("tls-key", KEY),
            shell("login", 'echo "login failed: password=hunter2 token: s3cr3t-t0ken" >&2; exit 1'),
          ],
          budget: { attempts: 1 },
        }),
      },
    });
    await h.commit();
    await h.settle();
    await h.advance(300_000);
    const attempts = (await h.store.attempts.ofInstance("app@n1")).map((a) => a.id);
    expect(attempts).toHaveLength(2);
    for (const id of attempts) {
      const about = lines.filter((l) => l.attemptId === id).map((l) => l.msg as string);
      expect(about).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^attempt created/),
          expect.stringMatching(/^attempt handed/),
          "attempt result: failed",
        ]),
      );
    }
    // Any line that speaks of an attempt says which one.
    const unnamed = lines.filter((l) => /\battempt\b/i.test(String(l.msg)) && !l.attemptId);
    expect(unnamed).toEqual([]);
    // Conditions and logs name the failure but never the secrets around it.
    const stuck = await h.store.conditions.list({ type: "Stuck" });
    expect(stuck).toHaveLength(1);
    const everything = JSON.stringify([
      lines,
      await h.store.conditions.list(),
      await h.store.attempts.ofInstance("app@n1"),
    ]);
    expect(everything).toContain("password=[redacted]");
    expect(everything).not.toContain("hunter2");
    expect(everything).not.toContain("s3cr3t-t0ken");
    expect(everything).not.toContain("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7");
  });
});
