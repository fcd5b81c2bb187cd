import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Operators, parseOperatorTokens, readOperatorTokens } from "../../src/hub/web/operators.js";
import { runCli } from "../helpers/cli.js";

const TOKEN = "0123456789abcdef0123456789abcdef";
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tokenFile(text: string, mode: number): string {
  const dir = mkdtempSync(join(tmpdir(), "steward-operators-"));
  dirs.push(dir);
  const file = join(dir, "operators");
  writeFileSync(file, text);
  chmodSync(file, mode);
  return file;
}

describe("hub - operator tokens", () => {
  it("web - a token file names its operators, one `name token` line each, comments and blank lines allowed", () => {
    const operators = parseOperatorTokens(`# who may act\n\nalice ${TOKEN}\n  bob   ${TOKEN}-bob  \n`, "ops");
    expect([...operators.values()].map((o) => o.name)).toEqual(["alice", "bob"]);
    expect(operators.get(TOKEN)).toEqual({ name: "alice" });
  });

  it.each([
    [`alice`, 'ops:1: expected "name token" (two fields), got 1'],
    [`alice ${TOKEN} extra`, "got 3"],
    [
      `alice short`,
      "ops:1: the token of alice is shorter than 16 characters: make one with `openssl rand -hex 32`",
    ],
    [`al/ice ${TOKEN}`, 'ops:1: operator name "al/ice" must be letters'],
    [`alice ${TOKEN}\nalice ${TOKEN}x`, "ops:2: operator alice is named twice"],
    [`alice ${TOKEN}\nbob ${TOKEN}`, "ops:2: the token of bob is also another's"],
    [`# nobody\n`, 'ops: no operator in it: write one "name token" line per operator'],
  ])("web - a token file %j is refused: %s", (text, message) => {
    expect(() => parseOperatorTokens(text, "ops")).toThrow(message);
  });

  it("web - a token file others can read is refused with the chmod that fixes it", () => {
    const open = tokenFile(`alice ${TOKEN}\n`, 0o644);
    expect(() => readOperatorTokens(open)).toThrow(
      `--operator-tokens ${open} can be read by others (mode 0644): run \`chmod 600 ${open}\``,
    );
    const closed = tokenFile(`alice ${TOKEN}\n`, 0o600);
    expect([...readOperatorTokens(closed).values()]).toEqual([{ name: "alice" }]);
    expect(() => readOperatorTokens(join(closed, "..", "missing"))).toThrow("no such file");
  });

  it("web - steward hub refuses a readable token file before it does anything else (exit 2)", async () => {
    const open = tokenFile(`alice ${TOKEN}\n`, 0o640);
    const dir = mkdtempSync(join(tmpdir(), "steward-operators-hub-"));
    dirs.push(dir);
    const run = await runCli(["--state", join(dir, "state"), "hub", "--operator-tokens", open], dir, {});
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`can be read by others (mode 0640): run \`chmod 600 ${open}\``);
    expect(run.stderr.split("\n").filter(Boolean)).toHaveLength(1);
  });

  it("web - a session knows its operator and CSRF token until it ends; a token is matched whole", () => {
    let now = 1_000;
    const operators = new Operators(parseOperatorTokens(`alice ${TOKEN}\n`, "ops"), {
      sessionMs: 60_000,
      now: () => now,
    });
    expect(operators.byTokenOf(TOKEN)).toEqual({ name: "alice" });
    expect(operators.byTokenOf(TOKEN.slice(0, -1))).toBeUndefined();
    expect(operators.byTokenOf("")).toBeUndefined();
    const session = operators.signIn({ name: "alice" });
    expect(session.csrf).not.toBe(session.id);
    expect(operators.session(session.id)?.operator.name).toBe("alice");
    now += 60_000;
    expect(operators.session(session.id)).toBeUndefined();
    const again = operators.signIn({ name: "alice" });
    operators.signOut(again.id);
    expect(operators.session(again.id)).toBeUndefined();
    expect(new Operators(new Map()).enabled).toBe(false);
  });
});
