/**
 * `steward nats config --cluster N`: N server configurations, each its own name, ports, store and
 * resolver, with routes to the others, and otherwise what one server gets (operator mode, the
 * accounts, TLS). The real nats-server checks every file it writes (`nats-server -t`).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Account } from "@nats-io/jwt";
import { createUser, fromSeed } from "@nats-io/nkeys";
import { afterAll, describe, expect, it } from "vitest";
import { serverMembers } from "../../../src/transport/nats/members.js";
import {
  jwtClaims,
  readNatsIssuer,
  signAccount,
  stewardAccountClaims,
} from "../../../src/transport/nats/operator.js";
import { locateNatsServer } from "../../../src/transport/nats/server.js";
import { removeNatsConfigDirs, runNatsConfig } from "../../helpers/nats-config.js";

describe("nats cluster config - three servers routed to each other", () => {
  afterAll(removeNatsConfigDirs);
  const run = (args: string[]) => runNatsConfig(args);

  it("nats cluster config - each server gets its own name, client and route port, store and resolver, and routes to the other two", () => {
    const members = serverMembers({ dir: "/etc/nats", listen: "10.0.0.5:4222", cluster: 3 });
    expect(
      members.map((m) => [m.name, m.file, m.listen, m.cluster?.listen, m.storeDir, m.resolverDir]),
    ).toEqual([
      [
        "steward-1",
        "nats-1.conf",
        "10.0.0.5:4222",
        "10.0.0.5:6222",
        "/etc/nats/jetstream/nats-1",
        "/etc/nats/jwt/nats-1",
      ],
      [
        "steward-2",
        "nats-2.conf",
        "10.0.0.5:4223",
        "10.0.0.5:6223",
        "/etc/nats/jetstream/nats-2",
        "/etc/nats/jwt/nats-2",
      ],
      [
        "steward-3",
        "nats-3.conf",
        "10.0.0.5:4224",
        "10.0.0.5:6224",
        "/etc/nats/jetstream/nats-3",
        "/etc/nats/jwt/nats-3",
      ],
    ]);
    expect(members.map((m) => m.cluster?.routes)).toEqual([
      ["nats-route://10.0.0.5:6223", "nats-route://10.0.0.5:6224"],
      ["nats-route://10.0.0.5:6222", "nats-route://10.0.0.5:6224"],
      ["nats-route://10.0.0.5:6222", "nats-route://10.0.0.5:6223"],
    ]);
    expect(new Set(members.map((m) => m.cluster?.name))).toEqual(new Set(["steward"]));
    // One server: what `nats config` always wrote.
    expect(serverMembers({ dir: "/etc/nats" })).toEqual([
      {
        name: "steward",
        file: "nats-server.conf",
        listen: "127.0.0.1:4222",
        storeDir: "/etc/nats/jetstream",
        resolverDir: "/etc/nats/jwt",
      },
    ]);
  });

  it("nats cluster config - operator mode: three files nats-server accepts, the same operator and accounts in each, no nats-server.conf", async () => {
    const result = await run([
      "--cluster",
      "3",
      "--listen",
      "127.0.0.1:14222",
      "--cluster-listen",
      "127.0.0.1:16222",
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(existsSync(join(result.bus, "nats-server.conf"))).toBe(false);
    const configs = [1, 2, 3].map((n) => readFileSync(join(result.bus, `nats-${n}.conf`), "utf8"));
    for (const [index, config] of configs.entries()) {
      const n = index + 1;
      expect(config).toContain(`listen: "127.0.0.1:${14221 + n}"`);
      expect(config).toContain(`server_name: steward-${n}`);
      expect(config).toContain(`store_dir: "${result.bus}/jetstream/nats-${n}"`);
      expect(config).toContain(`dir: "${result.bus}/jwt/nats-${n}"`);
      expect(config).toMatch(
        new RegExp(
          `cluster \\{\\n {2}name: "steward"\\n {2}listen: "127.0.0.1:${16221 + n}"\\n {2}routes: \\[`,
        ),
      );
      const routes = /routes: \[(.*)\]/.exec(config)?.[1];
      expect(routes?.split(", ").sort()).toEqual(
        [16222, 16223, 16224].filter((p) => p !== 16221 + n).map((p) => `"nats-route://127.0.0.1:${p}"`),
      );
      // The real server parses it (and exits): a field it does not know would fail here.
      execFileSync(locateNatsServer(), ["-t", "-c", join(result.bus, `nats-${n}.conf`)], { stdio: "pipe" });
    }
    const shared = (config: string) =>
      config
        .split("\n")
        .filter((line) => !/listen:|server_name:|store_dir:|dir:|routes:/.test(line))
        .join("\n");
    expect(shared(configs[1]!)).toBe(shared(configs[0]!));
    expect(shared(configs[2]!)).toBe(shared(configs[0]!));
    expect(configs[0]).toMatch(/^operator: eyJ/m);
    expect(result.stdout).toContain("nats-server -c");
    expect(result.stdout).toContain(
      "--nats nats://127.0.0.1:14222,nats://127.0.0.1:14223,nats://127.0.0.1:14224",
    );
  });

  it("nats cluster config - a key revoked on any one server's resolver stays revoked when the configuration is written again", async () => {
    const first = await run(["--cluster", "3"]);
    expect(first.code).toBe(0);
    const issuer = readNatsIssuer(join(first.bus, "credentials/hub-issuer.json"));
    const revoked = createUser().getPublicKey();
    const claims = stewardAccountClaims(
      issuer.account.publicKey,
      fromSeed(new TextEncoder().encode(issuer.account.signingSeed)).getPublicKey(),
      issuer.system.publicKey,
    );
    // As the full resolver of server 2 keeps the account the hub last pushed (its revocations).
    const pushed = await signAccount(issuer, { ...claims, revocations: { [revoked]: 1_800_000_000 } });
    writeFileSync(join(first.bus, "jwt/nats-2", `${issuer.account.publicKey}.jwt`), pushed);
    const again = await runNatsConfig(["--cluster", "3"], {}, first.dir);
    expect(again.code).toBe(0);
    for (const n of [1, 2, 3]) {
      const config = readFileSync(join(first.bus, `nats-${n}.conf`), "utf8");
      const preloaded = new RegExp(`^ {2}${issuer.account.publicKey}: (\\S+)$`, "m").exec(config)?.[1];
      expect(jwtClaims<Account>(preloaded!).nats.revocations, `nats-${n}.conf`).toEqual({
        [revoked]: 1_800_000_000,
      });
    }
  });

  it("nats cluster config - --static writes the same users into each server's file", async () => {
    const result = await run([
      "--static",
      "--node",
      "edge-1",
      "--cluster",
      "3",
      "--listen",
      "127.0.0.1:24222",
    ]);
    expect(result.code).toBe(0);
    for (const n of [1, 2, 3]) {
      const config = readFileSync(join(result.bus, `nats-${n}.conf`), "utf8");
      expect(config).toContain("# node edge-1");
      expect(config).toContain(`listen: "127.0.0.1:${24221 + n}"`);
      expect(config).toContain(`listen: "127.0.0.1:${6221 + n}"`);
      execFileSync(locateNatsServer(), ["-t", "-c", join(result.bus, `nats-${n}.conf`)], { stdio: "pipe" });
    }
  });

  it("nats cluster config - without --cluster: one nats-server.conf and no cluster block, as before", async () => {
    const result = await run([]);
    expect(result.code).toBe(0);
    const config = readFileSync(join(result.bus, "nats-server.conf"), "utf8");
    expect(config).toContain("server_name: steward\n");
    expect(config).not.toContain("cluster {");
    expect(existsSync(join(result.bus, "nats-1.conf"))).toBe(false);
  });

  const refusals: { name: string; args: string[]; message: RegExp }[] = [
    {
      name: "two servers",
      args: ["--cluster", "2"],
      message: /--cluster 2 must be a whole number from 3 to 9: .*fewer than 3 cannot lose one/,
    },
    {
      name: "a word for a size",
      args: ["--cluster", "three"],
      message: /--cluster three must be a number of servers, e.g. --cluster 3/,
    },
    {
      name: "route ports that overlap the client ports",
      args: ["--cluster", "3", "--listen", "127.0.0.1:6221"],
      message: /--listen 127.0.0.1:6221 and --cluster-listen 127.0.0.1:6222 overlap/,
    },
    {
      name: "--cluster-listen without --cluster",
      args: ["--cluster-listen", "127.0.0.1:6222"],
      message: /--cluster-listen only applies with --cluster N/,
    },
  ];
  for (const refusal of refusals)
    it(`nats cluster config - refuses ${refusal.name}, writing nothing`, async () => {
      const result = await run(refusal.args);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(refusal.message);
      expect(existsSync(result.bus)).toBe(false);
    });
});
