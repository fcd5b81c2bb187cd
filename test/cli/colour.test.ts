import { describe, expect, it } from "vitest";
import { colourDiff, colourEnabled, palette, redrawEnabled } from "../../src/cli/colour.js";
import { runCli } from "../helpers/cli.js";
import { assignmentYaml, file, nodes } from "../hub/helpers/fleet.js";
import { startHarness } from "../hub/helpers/harness.js";

const terminal = (env: NodeJS.ProcessEnv, isTty = true) => ({ env, isTty });

describe("cli - colour", () => {
  const cases: { name: string; io: ReturnType<typeof terminal>; colour: boolean; redraw: boolean }[] = [
    { name: "a terminal", io: terminal({ TERM: "xterm-256color" }), colour: true, redraw: true },
    { name: "NO_COLOR set", io: terminal({ TERM: "xterm", NO_COLOR: "1" }), colour: false, redraw: true },
    {
      name: "NO_COLOR empty is not set",
      io: terminal({ TERM: "xterm", NO_COLOR: "" }),
      colour: true,
      redraw: true,
    },
    { name: "TERM=dumb", io: terminal({ TERM: "dumb" }), colour: false, redraw: false },
    { name: "not a terminal", io: terminal({ TERM: "xterm" }, false), colour: false, redraw: false },
  ];
  for (const c of cases)
    it(`cli - colour: ${c.name}`, () => {
      expect({ colour: colourEnabled(c.io), redraw: redrawEnabled(c.io) }).toEqual({
        colour: c.colour,
        redraw: c.redraw,
      });
    });

  it("cli - colour: a diff's added and removed lines, only when colour is on", () => {
    const plan = "  ~ app@n1  new generation\n          -db v1\n          +db v2\n";
    expect(colourDiff(plan, palette(terminal({ TERM: "dumb" })))).toBe(plan);
    expect(colourDiff(plan, palette(terminal({ TERM: "xterm" })))).toBe(
      "\x1b[33m  ~ app@n1  new generation\x1b[0m\n\x1b[31m          -db v1\x1b[0m\n\x1b[32m          +db v2\x1b[0m\n",
    );
  });

  it("cli - colour: status colours its answer and states on a terminal, and not for NO_COLOR", async () => {
    const h = await startHarness({
      files: {
        ...nodes("n1"),
        "assignments/app.yaml": assignmentYaml("app", { nodes: ["n1"], resources: [file("conf", "v1")] }),
      },
    });
    await h.commit();
    await h.settle();
    const run = async (env: NodeJS.ProcessEnv) =>
      (await runCli(["--state", h.dir, "status"], h.dir, env, true)).stdout;
    expect(await run({ TERM: "xterm" })).toBe(
      "\x1b[32mright\x1b[0m: no open conditions; 1/1 instances converged\n",
    );
    expect(await run({ TERM: "xterm", NO_COLOR: "1" })).toBe(
      "right: no open conditions; 1/1 instances converged\n",
    );
  });
});
