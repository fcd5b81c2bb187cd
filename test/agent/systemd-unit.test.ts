/**
 * The systemd-unit driver against the real systemctl. Where systemd is not the init system (as on
 * the machine these tests were written on) the driver must fail permanently with
 * `SystemdNotRunning`, and the tests that need systemd are reported as skipped with that reason.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseShow } from "../../src/agent/drivers/systemd-unit.js";
import type { Resource } from "../../src/model/generated.js";
import { bundle, type Sandbox, sandbox } from "./helpers.js";

const systemdBooted = existsSync("/run/systemd/system");
const unitName = `steward-test-${process.pid}.service`;

let box: Sandbox;
beforeEach(() => {
  box = sandbox();
});
afterEach(async () => {
  if (systemdBooted) {
    spawnSync("systemctl", ["disable", "--now", unitName]);
    rmSync(`/etc/systemd/system/${unitName}`, { force: true });
    spawnSync("systemctl", ["daemon-reload"]);
  }
  await box.close();
});

const unit = (content: string): Resource => ({ kind: "systemd-unit", name: unitName, content });
const SLEEPER =
  "[Unit]\nDescription=steward test\n[Service]\nExecStart=/bin/sleep 3600\n[Install]\nWantedBy=multi-user.target\n";

describe("agent systemd-unit", () => {
  it.skipIf(systemdBooted)(
    "agent systemd-unit - where systemd is not the init system, a unit fails permanently (SystemdNotRunning)",
    async () => {
      const { result, report } = await box
        .agent()
        .apply(bundle({ roots: ["/etc/systemd/system"], resources: [unit(SLEEPER)] }));
      expect(result).toMatchObject({ outcome: "failed", failureClass: "permanent" });
      expect(["SystemdNotRunning", "ToolMissing"]).toContain(result.reason);
      expect(report.instances[0]!.resources[0]).toMatchObject({ status: "failed" });
      expect(existsSync(box.host(`/etc/systemd/system/${unitName}`))).toBe(false);
    },
  );

  it("agent systemd-unit - parses systemctl show", () => {
    expect(
      parseShow("LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"),
    ).toEqual({
      LoadState: "loaded",
      ActiveState: "active",
      SubState: "running",
      UnitFileState: "enabled",
    });
  });

  it.skipIf(!systemdBooted)(
    "agent systemd-unit - (needs systemd as PID 1; not here) unit file written, enabled and started; stopped with state stopped",
    async () => {
      // systemd reads the real /etc/systemd/system: no --root for this one.
      const agent = box.agent({ root: "" });
      const first = await agent.apply(bundle({ roots: ["/etc/systemd/system"], resources: [unit(SLEEPER)] }));
      expect(first.result.outcome).toBe("succeeded");
      expect(first.report.instances[0]!.resources[0]).toMatchObject({
        status: "ok",
        observed: { activeState: "active", unitFileState: "enabled" },
      });
      const stopped = await agent.apply(
        bundle({
          roots: ["/etc/systemd/system"],
          resources: [unit(SLEEPER)],
          generation: 2,
          state: "stopped",
        }),
      );
      expect(stopped.result.resources[0]!.action).toBe("stopped");
      expect(stopped.report.instances[0]!.state).toBe("stopped");
    },
  );
});
