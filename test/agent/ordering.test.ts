import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { applicationOrder } from "../../src/agent/order.js";
import type { Resource } from "../../src/model/generated.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
  mkdirSync(box.host("/srv"), { recursive: true });
});
afterEach(async () => {
  await box.close();
});

const log = (name: string): Resource => ({
  kind: "command",
  name,
  run: ["sh", "-c", `echo ${name} >> "$STEWARD_ROOT/srv/order.log"`],
});

function order(): string[] {
  return readFileSync(box.host("/srv/order.log"), "utf8").trim().split("\n");
}

describe("agent ordering - gating and dependencies", () => {
  it("agent ordering - a failed gating command blocks every resource after it and names itself", async () => {
    const { result, report } = await box.agent().apply(
      bundle({
        resources: [
          { kind: "file", name: "before", path: "/srv/before", content: "1" },
          { kind: "command", name: "migrate", run: ["sh", "-c", "exit 1"], gating: true },
          { kind: "file", name: "after", path: "/srv/after", content: "2" },
          { kind: "file", name: "depends", path: "/srv/depends", content: "3", dependsOn: ["before"] },
        ],
      }),
    );
    expect(result.resources.map((r) => [r.name, r.action, r.blockedBy])).toEqual([
      ["before", "created", undefined],
      ["migrate", "failed", undefined],
      ["after", "blocked", "migrate"],
      ["depends", "blocked", "migrate"],
    ]);
    expect(existsSync(box.host("/srv/after"))).toBe(false);
    expect(existsSync(box.host("/srv/depends"))).toBe(false);
    expect(report.instances[0]!.resources.map((r) => [r.name, r.status, r.blockedBy])).toEqual([
      ["before", "ok", undefined],
      ["migrate", "waiting", undefined],
      ["after", "blocked", "migrate"],
      ["depends", "blocked", "migrate"],
    ]);
    expect(report.instances[0]!.generation).toBe(0);
  });

  it("agent ordering - a non-gating failure blocks only its dependents, by the root failure", async () => {
    mkdirSync(box.host("/srv/conflict"), { recursive: true });
    const { result } = await box.agent().apply(
      bundle({
        resources: [
          { kind: "file", name: "broken", path: "/srv/conflict", content: "x" },
          { kind: "file", name: "needs-broken", path: "/srv/a", content: "a", dependsOn: ["broken"] },
          { kind: "file", name: "needs-needs", path: "/srv/b", content: "b", dependsOn: ["needs-broken"] },
          { kind: "file", name: "independent", path: "/srv/c", content: "c" },
        ],
      }),
    );
    expect(result.resources.map((r) => [r.name, r.action, r.blockedBy])).toEqual([
      ["broken", "failed", undefined],
      ["needs-broken", "blocked", "broken"],
      ["needs-needs", "blocked", "broken"],
      ["independent", "created", undefined],
    ]);
    expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "TypeConflict" });
  });

  it("agent ordering - dependsOn moves a resource after what it depends on, otherwise declared order", async () => {
    await box.agent().apply(
      bundle({
        resources: [{ ...log("first"), dependsOn: ["third"] }, log("second"), log("third"), log("fourth")],
      }),
    );
    expect(order()).toEqual(["second", "third", "first", "fourth"]);
  });

  it("agent ordering - a bundle with a dependency cycle applies nothing and fails permanently", async () => {
    const { result } = await box.agent().apply(
      bundle({
        resources: [
          { ...log("a"), dependsOn: ["b"] },
          { ...log("b"), dependsOn: ["a"] },
        ],
      }),
    );
    expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "InvalidBundle" });
    expect(existsSync(box.host("/srv/order.log"))).toBe(false);
  });

  it("agent ordering - files between barriers may run together; commands keep their place", () => {
    const steps = applicationOrder([
      { kind: "directory", name: "d", path: "/srv/d" },
      { kind: "file", name: "f1", path: "/srv/d/f1" },
      { kind: "file", name: "f2", path: "/srv/e/f2" },
      { kind: "command", name: "c", run: ["true"] },
      { kind: "file", name: "f3", path: "/srv/d/f3" },
    ]);
    const after = Object.fromEntries(steps.map((s) => [s.name, [...s.after].sort()]));
    expect(after).toEqual({ d: [], f1: [0], f2: [], c: [0, 1, 2], f3: [3] });
  });
});

describe("agent ordering - atomic groups", () => {
  it("agent ordering - when a later member fails, the earlier file of the group is restored", async () => {
    mkdirSync(box.host("/etc/demo/tls"), { recursive: true });
    writeFileSync(box.host("/etc/demo/tls/server.crt"), "OLD CERT\n");
    writeFileSync(box.host("/etc/demo/tls/server.key"), "OLD KEY\n");
    const { result, report } = await box.agent().apply(
      bundle({
        resources: [
          {
            kind: "file",
            name: "tls-cert",
            path: "/etc/demo/tls/server.crt",
            content: "NEW CERT\n",
            atomic: "tls",
          },
          { kind: "file", name: "unrelated", path: "/etc/demo/motd", content: "hello\n" },
          {
            kind: "file",
            name: "tls-key",
            path: "/etc/demo/tls/server.key",
            content: "NEW KEY\n",
            owner: "no-such-user-here",
            atomic: "tls",
          },
          {
            kind: "file",
            name: "tls-chain",
            path: "/etc/demo/tls/chain.pem",
            content: "CHAIN\n",
            atomic: "tls",
          },
        ],
      }),
    );
    expect(result.resources.map((r) => [r.name, r.action, r.blockedBy])).toEqual([
      ["tls-cert", "restored", "tls-key"],
      ["unrelated", "created", undefined],
      ["tls-key", "failed", undefined],
      ["tls-chain", "blocked", "tls-key"],
    ]);
    expect(result.resources[2]).toMatchObject({ failureClass: "permanent" });
    expect(result.reason).toBe("UnknownUser");
    // Only correct together: the pair is back to what it was, not half new.
    expect(readFileSync(box.host("/etc/demo/tls/server.crt"), "utf8")).toBe("OLD CERT\n");
    expect(readFileSync(box.host("/etc/demo/tls/server.key"), "utf8")).toBe("OLD KEY\n");
    expect(existsSync(box.host("/etc/demo/tls/chain.pem"))).toBe(false);
    expect(readFileSync(box.host("/etc/demo/motd"), "utf8")).toBe("hello\n");
    const statuses = report.instances[0]!.resources.map((r) => [r.name, r.status, r.blockedBy]);
    expect(statuses).toEqual([
      ["tls-cert", "blocked", "tls-key"],
      ["unrelated", "ok", undefined],
      ["tls-key", "failed", undefined],
      ["tls-chain", "blocked", "tls-key"],
    ]);
  });

  it("agent ordering - a group member created by the failed attempt is removed again", async () => {
    mkdirSync(box.host("/etc/demo/conflict.key"), { recursive: true });
    const { result } = await box.agent().apply(
      bundle({
        resources: [
          { kind: "file", name: "cert", path: "/etc/demo/new.crt", content: "CERT\n", atomic: "pair" },
          { kind: "file", name: "key", path: "/etc/demo/conflict.key", content: "KEY\n", atomic: "pair" },
        ],
      }),
    );
    expect(result.resources.map((r) => r.action)).toEqual(["restored", "failed"]);
    expect(existsSync(box.host("/etc/demo/new.crt"))).toBe(false);
  });
});
