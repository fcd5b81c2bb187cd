import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/main.js";
import { newUserSeed } from "../../../src/transport/nats/config.js";

describe("nats agent cli - steward agent --nats refuses what cannot work, in one line", () => {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-agent-cli-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function steward(argv: string[]): Promise<{ code: number; stderr: string }> {
    const stderr: string[] = [];
    const io = { stdout: () => {}, stderr: (t: string) => stderr.push(t), env: {}, cwd: dir, isTty: false };
    const code = await main(argv, io);
    return { code, stderr: stderr.join("") };
  }

  const seedFile = (name: string, mode: number) => {
    const file = join(dir, name);
    writeFileSync(file, `${newUserSeed()}\n`);
    chmodSync(file, mode);
    return file;
  };

  const notASeed = () => {
    const file = join(dir, "not-a-seed.nk");
    writeFileSync(file, "# a comment\nnot a seed\n", { mode: 0o600 });
    return file;
  };

  const cases: { name: string; argv: () => string[]; message: RegExp }[] = [
    {
      name: "no node name",
      argv: () => ["agent", "--nats", "nats://127.0.0.1:1"],
      message: /^steward: --node NAME is required with --nats: the node this agent runs as\n$/,
    },
    {
      name: "a heartbeat that is not a duration",
      argv: () => ["agent", "--nats", "nats://127.0.0.1:1", "--node", "web-1", "--heartbeat", "5x"],
      message: /^steward: --heartbeat 5x: not a duration: "5x" \(expected a number and ms, s, m, h or d\)\n$/,
    },
    {
      name: "a credentials file that is not there",
      argv: () => ["agent", "--nats", "nats://127.0.0.1:1", "--node", "web-1", "--creds", "missing.nk"],
      message:
        /^steward: cannot read NATS credentials .*missing\.nk: ENOENT — pass the file `steward nats config` wrote for this identity\n$/,
    },
    {
      name: "credentials others can read",
      argv: () => [
        "agent",
        "--nats",
        "nats://127.0.0.1:1",
        "--node",
        "web-1",
        "--creds",
        seedFile("open.nk", 0o644),
      ],
      message:
        /^steward: NATS credentials .*open\.nk are readable by others \(mode 644\): run `chmod 600 .*open\.nk`\n$/,
    },
    {
      name: "an --nkey file that holds no seed",
      argv: () => ["agent", "--nats", "nats://127.0.0.1:1", "--node", "web-1", "--nkey", notASeed()],
      message:
        /^steward: --nkey \S+not-a-seed\.nk holds no user nkey seed \(SU\.\.\.\): give the seed file `steward nats config` wrote \(credentials\/nodes\/NODE\.nk\)\n$/,
    },
  ];
  for (const c of cases)
    it(`nats agent cli - refuses ${c.name} (exit 2)`, async () => {
      const run = await steward(["--state", join(dir, "state"), ...c.argv()]);
      expect(run.stderr).toMatch(c.message);
      expect(run.code).toBe(2);
    });
});
