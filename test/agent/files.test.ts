import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Resource } from "../../src/model/generated.js";
import { again, bundle, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  await box.close();
});

function write(path: string, content: string, mode = 0o644): void {
  mkdirSync(dirname(box.host(path)), { recursive: true });
  writeFileSync(box.host(path), content, { mode });
  chmodSync(box.host(path), mode);
}

function modeOf(path: string): number {
  return lstatSync(box.host(path)).mode & 0o777;
}

interface Case {
  name: string;
  resource: Resource;
  /** Puts the system in the starting situation. */
  before?: () => void;
  /** The action the attempt reports for the resource. */
  action: string;
  /** Checks the system afterwards. */
  after: () => void;
}

const cases: Case[] = [
  {
    name: "file absent → created with content and mode",
    resource: { kind: "file", path: "/etc/demo/app.conf", content: "port = 80\n", mode: "0640" },
    action: "created",
    after: () => {
      expect(readFileSync(box.host("/etc/demo/app.conf"), "utf8")).toBe("port = 80\n");
      expect(modeOf("/etc/demo/app.conf")).toBe(0o640);
    },
  },
  {
    name: "file drifted content → healed",
    resource: { kind: "file", path: "/etc/demo/app.conf", content: "port = 80\n" },
    before: () => write("/etc/demo/app.conf", "port = 8080 # edited by hand\n"),
    action: "updated",
    after: () => {
      expect(readFileSync(box.host("/etc/demo/app.conf"), "utf8")).toBe("port = 80\n");
      // A repair never destroys: the hand-edited content is kept, by its hash.
      const kept = readdirSync(join(box.state, "kept"));
      expect(kept).toHaveLength(1);
      expect(readFileSync(join(box.state, "kept", kept[0]!), "utf8")).toBe("port = 8080 # edited by hand\n");
    },
  },
  {
    name: "file drifted mode only → mode healed, content untouched",
    resource: { kind: "file", path: "/etc/demo/secret", content: "s3cret\n", mode: "0600" },
    before: () => write("/etc/demo/secret", "s3cret\n", 0o666),
    action: "updated",
    after: () => {
      expect(modeOf("/etc/demo/secret")).toBe(0o600);
      expect(readFileSync(box.host("/etc/demo/secret"), "utf8")).toBe("s3cret\n");
    },
  },
  {
    name: "file drifted owner → owner healed",
    resource: { kind: "file", path: "/etc/demo/owned", content: "x", owner: "0", group: "0" },
    before: () => {
      write("/etc/demo/owned", "x");
      chownSync(box.host("/etc/demo/owned"), 1, 1);
    },
    action: "updated",
    after: () => expect(lstatSync(box.host("/etc/demo/owned"))).toMatchObject({ uid: 0, gid: 0 }),
  },
  {
    name: "file already right → nothing done (not even rewritten)",
    resource: { kind: "file", path: "/etc/demo/app.conf", content: "port = 80\n", mode: "0644" },
    before: () => write("/etc/demo/app.conf", "port = 80\n"),
    action: "unchanged",
    after: () => expect(readFileSync(box.host("/etc/demo/app.conf"), "utf8")).toBe("port = 80\n"),
  },
  {
    name: "file with base64 content → exact bytes",
    resource: {
      kind: "file",
      path: "/etc/demo/blob.bin",
      content: Buffer.from([0, 255, 1, 254]).toString("base64"),
      encoding: "base64",
    },
    action: "created",
    after: () => expect([...readFileSync(box.host("/etc/demo/blob.bin"))]).toEqual([0, 255, 1, 254]),
  },
  {
    name: "file ensure absent → moved to the trash, recoverable",
    resource: { kind: "file", path: "/etc/demo/old.conf", ensure: "absent" },
    before: () => write("/etc/demo/old.conf", "keep me somewhere\n"),
    action: "removed",
    after: () => {
      expect(existsSync(box.host("/etc/demo/old.conf"))).toBe(false);
      const stamps = readdirSync(join(box.state, "trash"));
      expect(readFileSync(join(box.state, "trash", stamps[0]!, "etc/demo/old.conf"), "utf8")).toBe(
        "keep me somewhere\n",
      );
    },
  },
  {
    name: "directory absent → created with parents and mode",
    resource: { kind: "directory", path: "/srv/app/data", mode: "0750" },
    action: "created",
    after: () => {
      expect(lstatSync(box.host("/srv/app/data")).isDirectory()).toBe(true);
      expect(modeOf("/srv/app/data")).toBe(0o750);
    },
  },
  {
    name: "directory drifted mode → healed",
    resource: { kind: "directory", path: "/srv/app", mode: "0755" },
    before: () => {
      mkdirSync(box.host("/srv/app"), { recursive: true });
      chmodSync(box.host("/srv/app"), 0o777);
    },
    action: "updated",
    after: () => expect(modeOf("/srv/app")).toBe(0o755),
  },
  {
    name: "directory already right → nothing done",
    resource: { kind: "directory", path: "/srv/app", mode: "0755" },
    before: () => {
      mkdirSync(box.host("/srv/app"), { recursive: true });
      chmodSync(box.host("/srv/app"), 0o755);
    },
    action: "unchanged",
    after: () => expect(modeOf("/srv/app")).toBe(0o755),
  },
  {
    name: "directory ensure absent → moved to the trash with its content",
    resource: { kind: "directory", path: "/srv/old", ensure: "absent" },
    before: () => write("/srv/old/inside.txt", "data"),
    action: "removed",
    after: () => {
      expect(existsSync(box.host("/srv/old"))).toBe(false);
      const stamps = readdirSync(join(box.state, "trash"));
      expect(readFileSync(join(box.state, "trash", stamps[0]!, "srv/old/inside.txt"), "utf8")).toBe("data");
    },
  },
  {
    name: "symlink absent → created, absolute target mapped under the root",
    resource: { kind: "symlink", path: "/etc/demo/current", target: "/srv/release-2" },
    action: "created",
    after: () => expect(readlinkSync(box.host("/etc/demo/current"))).toBe(box.host("/srv/release-2")),
  },
  {
    name: "symlink drifted target → healed",
    resource: { kind: "symlink", path: "/etc/demo/current", target: "release-2" },
    before: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      symlinkSync("release-1", box.host("/etc/demo/current"));
    },
    action: "updated",
    after: () => expect(readlinkSync(box.host("/etc/demo/current"))).toBe("release-2"),
  },
  {
    name: "symlink already right → nothing done",
    resource: { kind: "symlink", path: "/etc/demo/current", target: "release-2" },
    before: () => {
      mkdirSync(box.host("/etc/demo"), { recursive: true });
      symlinkSync("release-2", box.host("/etc/demo/current"));
    },
    action: "unchanged",
    after: () => expect(readlinkSync(box.host("/etc/demo/current"))).toBe("release-2"),
  },
];

describe("agent files - table per driver", () => {
  for (const c of cases) {
    it(`agent files - ${c.name}`, async () => {
      c.before?.();
      const agent = box.agent();
      const first = bundle({ resources: [c.resource] });
      const { result, report } = await agent.apply(first);
      expect(result.outcome).toBe("succeeded");
      expect(result.resources[0]!.action).toBe(c.action);
      c.after();
      const [instance] = report.instances;
      expect(instance!.resources[0]!.status).toBe("ok");
      expect(instance!.converged).toBe(true);
      // Applying the same generation again is a no-op: the system is already as desired.
      const second = await agent.apply(again(first));
      expect(second.result.resources[0]!.action).toBe("unchanged");
      c.after();
    });
  }
});

describe("agent files - conflicts and reports", () => {
  it("agent files - a new generation replaces what the last one declared without a kept copy; a hand edit is kept", async () => {
    const agent = box.agent();
    const file = (content: string, generation: number) =>
      bundle({ generation, resources: [{ kind: "file", path: "/etc/demo/app.conf", content }] });
    const keptFiles = () => (existsSync(join(box.state, "kept")) ? readdirSync(join(box.state, "kept")) : []);
    await agent.apply(file("port = 80\n", 1));
    const second = await agent.apply(file("port = 81\n", 2));
    expect(second.result.outcome).toBe("succeeded");
    expect(second.result.resources[0]?.action).toBe("updated");
    expect(second.result.resources[0]?.message).toMatch(
      /previous content was what the previous generation declared$/,
    );
    expect(keptFiles()).toEqual([]);
    // A hand edit between generations is not in the repository: it is kept before it is replaced.
    write("/etc/demo/app.conf", "port = 9999 # edited by hand\n");
    const third = await agent.apply(file("port = 82\n", 3));
    expect(third.result.resources[0]?.message).toMatch(/previous content kept at \S+$/);
    expect(keptFiles()).toHaveLength(1);
    expect(readFileSync(join(box.state, "kept", keptFiles()[0]!), "utf8")).toBe(
      "port = 9999 # edited by hand\n",
    );
    expect(readFileSync(box.host("/etc/demo/app.conf"), "utf8")).toBe("port = 82\n");
  });

  it("agent files - a directory where a file should be is a permanent conflict, left untouched", async () => {
    mkdirSync(box.host("/etc/demo/app.conf"), { recursive: true });
    const { result, report } = await box
      .agent()
      .apply(bundle({ resources: [{ kind: "file", path: "/etc/demo/app.conf", content: "x" }] }));
    expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent", reason: "TypeConflict" });
    expect(lstatSync(box.host("/etc/demo/app.conf")).isDirectory()).toBe(true);
    expect(report.instances[0]!.resources[0]).toMatchObject({ status: "failed", reason: "TypeConflict" });
  });

  it("agent files - observe reports drift with a field-by-field diff and changes nothing", async () => {
    const agent = box.agent();
    await agent.apply(
      bundle({ resources: [{ kind: "file", path: "/etc/demo/a", content: "one\n", mode: "0644" }] }),
    );
    writeFileSync(box.host("/etc/demo/a"), "two\n");
    chmodSync(box.host("/etc/demo/a"), 0o600);
    const report = await agent.observe();
    const resource = report.instances[0]!.resources[0]!;
    expect(resource.status).toBe("drifted");
    expect(resource.diff).toEqual([expect.stringMatching(/^content sha256:/), "mode 0600 → 0644"]);
    expect(report.instances[0]!.converged).toBe(false);
    expect(readFileSync(box.host("/etc/demo/a"), "utf8")).toBe("two\n");
  });
});
