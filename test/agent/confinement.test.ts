import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Resource } from "../../src/model/generated.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
let outside: string;
beforeEach(() => {
  box = sandbox();
  // A directory outside the root entirely, standing for the host's real /etc.
  outside = join(box.dir, "real-etc");
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(outside, "passwd"), "root:x:0:0\n");
});
afterEach(async () => {
  await box.close();
});

interface Case {
  name: string;
  setup?: () => void;
  resource: Resource;
  reason: string;
  /** Must be untouched afterwards. */
  untouched?: () => void;
}

const cases: Case[] = [
  {
    name: "a path with '..' is refused",
    resource: { kind: "file", path: "/etc/demo/../../real-etc/passwd", content: "pwned\n" },
    reason: "PathNotCanonical",
  },
  {
    name: "a path outside the node's roots is refused",
    resource: { kind: "file", path: "/etc/shadow", content: "pwned\n" },
    reason: "PathOutsideRoots",
  },
  {
    name: "a symlinked directory inside the roots that leads out is not followed",
    setup: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      symlinkSync(outside, box.host("/etc/demo/escape"));
    },
    resource: { kind: "file", path: "/etc/demo/escape/passwd", content: "pwned\n" },
    reason: "PathEscapesRoots",
    untouched: () => expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("root:x:0:0\n"),
  },
  {
    name: "a real directory beneath an escaping symlink is not followed either",
    setup: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      mkdirSync(join(outside, "nested", "deeper"), { recursive: true });
      symlinkSync(outside, box.host("/etc/demo/escape"));
    },
    resource: { kind: "file", path: "/etc/demo/escape/nested/deeper/passwd", content: "pwned\n" },
    reason: "PathEscapesRoots",
    untouched: () => expect(existsSync(join(outside, "nested", "deeper", "passwd"))).toBe(false),
  },
  {
    name: "a directory created through an escaping symlink is refused",
    setup: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      symlinkSync(outside, box.host("/etc/demo/escape"));
    },
    resource: { kind: "directory", path: "/etc/demo/escape/sub/dir" },
    reason: "PathEscapesRoots",
    untouched: () => expect(existsSync(join(outside, "sub"))).toBe(false),
  },
  {
    name: "a symlink whose absolute target is outside the roots is refused",
    resource: { kind: "symlink", path: "/etc/demo/link", target: "/etc/shadow" },
    reason: "PathOutsideRoots",
  },
  {
    name: "a symlink whose relative target climbs out of the roots is refused",
    resource: { kind: "symlink", path: "/etc/demo/link", target: "../../var/secret" },
    reason: "TargetOutsideRoots",
  },
  {
    name: "a file whose path is itself a symlink is not written through",
    setup: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      symlinkSync(join(outside, "passwd"), box.host("/etc/demo/app.conf"));
    },
    resource: { kind: "file", path: "/etc/demo/app.conf", content: "pwned\n" },
    reason: "TypeConflict",
    untouched: () => expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("root:x:0:0\n"),
  },
];

describe("agent confinement", () => {
  for (const c of cases) {
    it(`agent confinement - ${c.name}`, async () => {
      c.setup?.();
      const { result, report } = await box
        .agent()
        .apply(bundle({ roots: ["/etc/demo"], resources: [c.resource] }));
      expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: c.reason });
      expect(result.resources[0]).toMatchObject({ action: "failed", reason: c.reason });
      expect(report.instances[0]!.resources[0]).toMatchObject({ status: "failed", reason: c.reason });
      c.untouched?.();
    });
  }

  it("agent confinement - a symlink inside the roots to another root is followed", async () => {
    mkdirSync(box.host("/srv/data"), { recursive: true });
    mkdirSync(box.host("/etc/demo"), { recursive: true });
    symlinkSync(box.host("/srv/data"), box.host("/etc/demo/data"));
    const { result } = await box.agent().apply(
      bundle({
        roots: ["/etc/demo", "/srv"],
        resources: [{ kind: "file", path: "/etc/demo/data/x", content: "ok" }],
      }),
    );
    expect(result.outcome).toBe("succeeded");
    expect(readFileSync(box.host("/srv/data/x"), "utf8")).toBe("ok");
  });

  it("agent confinement - nothing is written outside the mapped root", async () => {
    const { result } = await box.agent().apply(
      bundle({
        roots: ["/etc/demo"],
        resources: [{ kind: "file", path: "/etc/demo/motd", content: "hi\n" }],
      }),
    );
    expect(result.outcome).toBe("succeeded");
    expect(readFileSync(box.host("/etc/demo/motd"), "utf8")).toBe("hi\n");
    expect(existsSync("/etc/demo/motd")).toBe(false);
  });
});
