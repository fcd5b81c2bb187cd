import { generateKeyPairSync } from "node:crypto";
import * as fs from "node:fs";
import { Command } from "commander";
import { afterEach, describe, expect, it } from "vitest";
import { addStatusFlags } from "../../src/cli/status-flags.js";
import { EnvironmentError, UsageError } from "../../src/model/errors.js";
import {
  createStatusWriters,
  effectiveStatusSettings,
  githubApiBase,
  type StatusFlags,
} from "../../src/status/settings.js";
import { type FakeForge, startGithubForge } from "../helpers/forge-openapi.js";
import { SHA, TOKEN } from "./fixtures.js";

let forge: FakeForge | undefined;
afterEach(async () => {
  await forge?.close();
  expect(forge?.problems ?? []).toEqual([]);
  forge = undefined;
});

/** Parses argv with the status flags the way a hub command would. */
function parseFlags(argv: string[]): StatusFlags {
  const command = addStatusFlags(new Command("hub"))
    .exitOverride()
    .configureOutput({ writeErr: () => {} });
  command.parse(argv, { from: "user" });
  return command.opts<StatusFlags>();
}

describe("status settings", () => {
  it("status settings - without configuration statuses go to git notes; flags replace steward.yaml's providers", () => {
    expect(effectiveStatusSettings(undefined)).toEqual({ providers: [{ type: "gitnotes" }] });
    const spec = {
      publicUrl: "https://hub.example",
      providers: [{ type: "gitlab" as const, project: "infra/fleet" }, { type: "gitnotes" as const }],
    };
    expect(effectiveStatusSettings(spec)).toEqual(spec);
    expect(effectiveStatusSettings(spec, parseFlags(["--status", "none"]))).toEqual({
      publicUrl: "https://hub.example",
      providers: [],
    });
    expect(
      effectiveStatusSettings(
        spec,
        parseFlags([
          "--status",
          "github",
          "--status-repo",
          "acme/fleet",
          "--status-url",
          "https://ghe.example.com",
          "--status-token-env",
          "FLEET_STATUS_TOKEN",
          "--public-url",
          "https://steward.example",
        ]),
      ),
    ).toEqual({
      publicUrl: "https://steward.example",
      providers: [
        {
          type: "github",
          owner: "acme",
          repo: "fleet",
          url: "https://ghe.example.com",
          tokenEnv: "FLEET_STATUS_TOKEN",
        },
      ],
    });
    expect(
      effectiveStatusSettings(undefined, parseFlags(["--status", "gitlab", "--status-repo", "infra/fleet"])),
    ).toEqual({
      providers: [{ type: "gitlab", project: "infra/fleet" }],
    });
  });

  it.each([
    [["--status-repo", "acme/fleet"], /need --status TYPE/],
    [["--status", "github", "--status-repo", "acme"], /OWNER\/REPO/],
    [["--status", "github", "--status-token-env", "ghp_abcdef"], /NAME of an environment variable/],
    [["--status", "gitea", "--status-url", "https://user:pw@gitea.example"], /must not carry credentials/],
    [
      ["--status", "github", "--status-app-id", "12"],
      /--status-app-id, --status-app-installation and --status-app-key-env together/,
    ],
    [
      [
        "--status",
        "gitlab",
        "--status-app-id",
        "1",
        "--status-app-installation",
        "2",
        "--status-app-key-env",
        "K",
      ],
      /only apply to --status github/,
    ],
    [["--public-url", "hub.example"], /--public-url must be a URL/],
  ])("status settings - bad flags %j are a usage error saying what to fix", (argv, message) => {
    const attempt = () => effectiveStatusSettings(undefined, parseFlags(argv));
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow(message);
  });

  it("status settings - a token on the command line is refused without repeating it", () => {
    const attempt = () => parseFlags(["--status", "github", "--status-token", TOKEN]);
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow(/not taken from the command line.*--status-token-env NAME/);
    try {
      attempt();
    } catch (error) {
      expect((error as Error).message).not.toContain(TOKEN);
    }
  });

  it("status settings - a missing token names the variable and the fix, and a present one is never shown", () => {
    const settings = {
      providers: [{ type: "github" as const, owner: "acme", repo: "fleet", tokenEnv: "FLEET_TOKEN" }],
    };
    expect(() => createStatusWriters(settings, { env: {} })).toThrow(EnvironmentError);
    expect(() => createStatusWriters(settings, { env: { FLEET_TOKEN: " " } })).toThrow(
      "spec.status.providers[0] (github) needs a token: set FLEET_TOKEN in the hub's environment (or name another variable with tokenEnv / --status-token-env)",
    );
    const [writer] = createStatusWriters(settings, { env: { FLEET_TOKEN: TOKEN } });
    expect(writer?.name).toBe("github:api.github.com/acme/fleet");
    expect(JSON.stringify(writer)).not.toContain(TOKEN);
    expect(() =>
      createStatusWriters(
        { providers: [{ type: "gitea", owner: "a", repo: "b" }] },
        { env: { GITEA_TOKEN: "x" } },
      ),
    ).toThrow(/needs url/);
    expect(() =>
      createStatusWriters({ providers: [{ type: "gitlab" }] }, { env: { GITLAB_TOKEN: "x" } }),
    ).toThrow(/needs project/);
    expect(() => createStatusWriters({ providers: [{ type: "gitnotes" }] }, { env: {} })).toThrow(
      /fleet repository/,
    );
  });

  it("status settings - GitHub Enterprise URLs get /api/v3 unless they name an API path", () => {
    expect(githubApiBase("https://api.github.com/")).toBe("https://api.github.com");
    expect(githubApiBase("https://ghe.example.com")).toBe("https://ghe.example.com/api/v3");
    expect(githubApiBase("https://ghe.example.com/api/v3/")).toBe("https://ghe.example.com/api/v3");
  });

  it("status settings - writers built from settings post with the credentials from the environment", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    forge = await startGithubForge({
      token: TOKEN,
      basePath: "/api/v3",
      app: {
        appId: 9,
        installationId: 10,
        publicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
      },
    });
    const host = forge.url.replace(/\/api\/v3$/, "");
    const writers = createStatusWriters(
      {
        providers: [
          { type: "github", owner: "acme", repo: "fleet", url: host },
          {
            type: "github",
            owner: "acme",
            repo: "fleet",
            url: forge.url,
            appId: 9,
            installationId: 10,
            privateKeyEnv: "APP_KEY",
          },
          { type: "gitnotes" },
        ],
      },
      {
        env: { GITHUB_TOKEN: TOKEN, APP_KEY: privateKey.export({ type: "pkcs8", format: "pem" }).toString() },
        gitnotes: { fs, gitdir: "/nonexistent" },
      },
    );
    expect(writers.map((w) => w.name)).toEqual([
      `github:${new URL(host).host}/acme/fleet`,
      `github:${new URL(host).host}/acme/fleet`,
      "gitnotes",
    ]);
    for (const writer of writers.slice(0, 2))
      await writer.write({ sha: SHA, context: "steward/fleet", state: "success", description: "ok" });
    expect(forge.requests.map((r) => [r.operationId, r.path])).toEqual([
      ["repos/create-commit-status", `/repos/acme/fleet/statuses/${SHA}`],
      ["apps/create-installation-access-token", "/app/installations/10/access_tokens"],
      ["repos/create-commit-status", `/repos/acme/fleet/statuses/${SHA}`],
    ]);
  });
});
