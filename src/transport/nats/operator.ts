/**
 * NATS's decentralised authentication for steward (operator mode): an operator, a system account
 * and steward's account, each user a JWT signed by the account's signing key. The server trusts
 * the operator and reads the accounts from its resolver, never a list of users, so a user JWT the
 * hub signs for a host admitted in Git connects at once, without a server reload.
 *
 * `steward nats config` (the default, operator mode) plans here what it writes: the server
 * configuration, the keys that stay with the operator (`keys/`), the credentials of the hub, a
 * viewer, the task agents and the shared enrolment credential (`.creds`), and the hub's issuer file
 * (`credentials/hub-issuer.json`): the account's signing key to sign nodes' user JWTs, the
 * operator's signing key to sign the account JWT again with the keys it revokes, and a
 * system-account user to push that JWT to the server (`$SYS.REQ.CLAIMS.UPDATE`).
 *
 * The resolver is `full` (a directory of JWTs the server keeps): Debian's nats-server 2.9.10 takes
 * account updates only from such a resolver (`MEMORY` answers `$SYS.REQ.CLAIMS.UPDATE` with no
 * responders), and it keeps the last update across restarts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import {
  type Account,
  type ClaimsData,
  createAccount,
  createOperator,
  createUser,
  decode,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
  fromSeed,
  type KeyPair,
  type User,
} from "@nats-io/jwt";
import { EnvironmentError, UsageError } from "../../model/errors.js";
import {
  type PlannedServer,
  plannedServers,
  STEWARD_ACCOUNT,
  serverBasics,
  writeConfigFiles,
} from "./config.js";
import type { Fsync } from "./fsync.js";
import { type ServerMember, serverMembers } from "./members.js";
import {
  enrolmentPermissions,
  hubPermissions,
  nodePermissions,
  type Permissions,
  taskAgentPermissions,
  viewerPermissions,
} from "./permissions.js";
import { assertToken, identities } from "./subjects.js";

/** The system account's name in the JWTs (the server's events and the claims update service live there). */
const SYSTEM_ACCOUNT = "SYS";

/** Roles whose credentials `steward nats config` writes in operator mode. */
export type OperatorRole = "hub" | "viewer" | "task-agent" | "enrol";

/** What `steward nats config` is told in operator mode. */
export interface OperatorConfigInput {
  /** Absolute output directory. */
  dir: string;
  /** Default `["tasks"]`. */
  taskAgents?: string[];
  /** host:port the server listens on; default `127.0.0.1:4222`. */
  listen?: string;
  /** Absolute JetStream store directory; default `<dir>/jetstream`. */
  storeDir?: string;
  tls?: { ca?: string; cert?: string; key?: string };
  /** A cluster of this many servers on consecutive ports (see members.ts); absent: one server. */
  cluster?: number;
  /** host:port of the first server's routes in a cluster; default the listen host, port 6222. */
  clusterListen?: string;
  /** `jetstream { sync_interval }` to write; absent: the server's default (fsync.ts says when to give it). */
  fsync?: Fsync;
}

/** One credential of the plan, without its seed: safe to print. */
export interface PlannedCredential {
  role: OperatorRole;
  name: string;
  publicKey: string;
  /** Relative to the output directory. */
  credentials: string;
  /** True when its key was made by this run (false: an earlier run's was kept). */
  created: boolean;
}

/** What `steward nats config` writes in operator mode: the files, and what is safe to print of them. */
export interface OperatorConfigPlan {
  dir: string;
  /** The (first) server's configuration. */
  serverConfig: string;
  /** The (first) server's store directory. */
  storeDir: string;
  /** Where the (first) server keeps account JWTs (the `full` resolver's directory). */
  resolverDir: string;
  /** The (first) server's client address. */
  listen: string;
  /** Every server's configuration (`files` holds each too). */
  servers: PlannedServer[];
  operator: string;
  account: string;
  credentials: PlannedCredential[];
  /** Relative to the output directory: what the hub needs to issue and revoke nodes' credentials. */
  issuerFile: string;
  files: { path: string; mode: number; content: string }[];
}

/**
 * What the hub holds to admit and revoke nodes (`credentials/hub-issuer.json`, mode 0600, on the
 * hub only): steward's account and its signing key, the operator's signing key, and a user of the
 * system account.
 */
export interface NatsIssuer {
  operator: { publicKey: string; signingSeed: string };
  account: { name: string; publicKey: string; signingSeed: string };
  system: { publicKey: string; userJwt: string; userSeed: string };
}

const KEY_FILES = {
  operator: "keys/operator.nk",
  operatorSigning: "keys/operator-signing.nk",
  system: "keys/system-account.nk",
  systemUser: "keys/system-user.nk",
  account: "keys/account.nk",
  accountSigning: "keys/account-signing.nk",
} as const;

type KeyName = keyof typeof KEY_FILES;

const KEY_PREFIX: Record<KeyName, string> = {
  operator: "SO",
  operatorSigning: "SO",
  system: "SA",
  systemUser: "SU",
  account: "SA",
  accountSigning: "SA",
};

/** The issuer file, relative to the output directory. */
export const ISSUER_FILE = "credentials/hub-issuer.json";

/** Where a role's credentials live, relative to the output directory. */
export function operatorCredentialsPath(role: OperatorRole, name: string): string {
  if (role === "hub") return "credentials/hub.creds";
  if (role === "viewer") return "credentials/viewer.creds";
  if (role === "enrol") return "credentials/enrol.creds";
  return `credentials/task-agents/${name}.creds`;
}

/**
 * Limits of the system account: explicit, since without them nats-server refuses every connection
 * ("maximum account active connections exceeded"); no JetStream (the server refuses to start with it there).
 */
const SYSTEM_LIMITS = {
  conn: -1,
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  leaf: -1,
};

/** Limits of steward's account: the same, and JetStream storage, which must be given to be enabled. */
const ACCOUNT_LIMITS = { ...SYSTEM_LIMITS, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 };

/** Client connect and disconnect events of steward's account, which the hub observes. */
function clientEvents(account: string): string {
  return `$SYS.ACCOUNT.${account}.>`;
}

/** Steward's account claims (no revocations): what `nats config` preloads and the hub keeps. */
export function stewardAccountClaims(
  account: string,
  signingKey: string,
  systemAccount: string,
): Partial<Account> {
  return {
    limits: ACCOUNT_LIMITS,
    signing_keys: [signingKey],
    imports: [
      { name: "client events", subject: clientEvents(account), account: systemAccount, type: "stream" },
    ],
  };
}

/** A user's permissions as JWT claims. */
export function userClaims(permissions: Permissions): Partial<User> {
  return {
    pub: { allow: permissions.publish },
    sub: { allow: permissions.subscribe },
    ...(permissions.allowResponses ? { resp: { max: 1, ttl: 0 } } : {}),
  };
}

/** The name a user JWT carries, and the first line of a `.creds` file: whose they are. */
export function userJwtName(role: OperatorRole | "node", name: string): string {
  return `steward ${role} ${name}`;
}

function keyPair(seed: string): KeyPair {
  return fromSeed(new TextEncoder().encode(seed));
}

function seedOf(pair: KeyPair): string {
  return new TextDecoder().decode(pair.getSeed());
}

/** A user JWT signed by steward's account signing key for `publicKey`. */
export function signUser(
  issuer: Pick<NatsIssuer, "account">,
  name: string,
  publicKey: string,
  permissions: Permissions,
): Promise<string> {
  return encodeUser(name, publicKey, issuer.account.publicKey, userClaims(permissions), {
    signer: keyPair(issuer.account.signingSeed),
  });
}

/**
 * A node's user JWT: the node's permissions (its own attempts in; its own reports, results and
 * heartbeats out), for the public key its Node document declares. No expiry: a node removed from
 * Git, or given another key, is revoked in the account JWT (see revocations.ts).
 */
export function signNodeUser(
  issuer: Pick<NatsIssuer, "account">,
  node: string,
  nkey: string,
): Promise<string> {
  assertToken(node, "node name");
  return signUser(issuer, userJwtName("node", node), nkey, nodePermissions(node, identities.node(node)));
}

/** Steward's account JWT with `revocations` (public key → seconds), signed by the operator's signing key. */
export function signAccount(
  issuer: Pick<NatsIssuer, "account" | "operator">,
  claims: Partial<Account>,
): Promise<string> {
  return encodeAccount(issuer.account.name, issuer.account.publicKey, claims, {
    signer: keyPair(issuer.operator.signingSeed),
  });
}

/** The claims of a JWT (not verified: the server does that). */
export function jwtClaims<T>(jwt: string): ClaimsData<T> {
  return decode<T>(jwt);
}

/**
 * Plans the operator-mode configuration. `seedIn(path)` returns the seed an earlier run wrote at
 * `path` (a key file or a `.creds` file), so keys and credentials in use are kept; new ones are made.
 * `storedAccount(key)` returns the account JWT the server keeps in its resolver directory, if any:
 * its revocations are carried into the preloaded account (newer, so the server takes it at its
 * next start), so running this again never lets a revoked node back in. Throws UsageError on a bad
 * name or address.
 */
export async function planOperatorConfig(
  input: OperatorConfigInput,
  seedIn: (path: string) => string | undefined,
  storedAccount: (publicKey: string) => string | undefined = () => undefined,
): Promise<OperatorConfigPlan> {
  if (!isAbsolute(input.dir)) throw new UsageError(`--out ${input.dir} must be an absolute path`);
  const members = serverMembers(input);
  const taskAgents = [...new Set(input.taskAgents ?? ["tasks"])].sort();
  for (const agent of taskAgents) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(agent))
      throw new UsageError(
        `task agent name "${agent}" is not a DNS label: use lower-case letters, digits and "-" (e.g. triage)`,
      );
  }
  if (input.tls && Boolean(input.tls.cert) !== Boolean(input.tls.key))
    throw new UsageError("--tls-cert and --tls-key go together: give both or neither");

  const files: OperatorConfigPlan["files"] = [];
  const makers: Record<KeyName, () => KeyPair> = {
    operator: createOperator,
    operatorSigning: createOperator,
    system: createAccount,
    systemUser: createUser,
    account: createAccount,
    accountSigning: createAccount,
  };
  const keys = {} as Record<KeyName, KeyPair>;
  for (const name of Object.keys(KEY_FILES) as KeyName[]) {
    const path = KEY_FILES[name];
    const existing = seedIn(path);
    if (existing !== undefined && !existing.startsWith(KEY_PREFIX[name]))
      throw new UsageError(
        `${join(input.dir, path)} does not hold a ${KEY_PREFIX[name]}... seed: move it away or fix it, then run again`,
      );
    keys[name] = existing ? keyPair(existing) : makers[name]();
    files.push({
      path,
      mode: 0o600,
      content: `# steward nats config: ${name} key; keep this file 0600, with the operator\n${seedOf(keys[name])}\n`,
    });
  }
  const operator = keys.operator.getPublicKey();
  const system = keys.system.getPublicKey();
  const account = keys.account.getPublicKey();
  const operatorJwt = await encodeOperator("steward", keys.operator, {
    system_account: system,
    signing_keys: [keys.operatorSigning.getPublicKey()],
  });
  const systemJwt = await encodeAccount(
    SYSTEM_ACCOUNT,
    keys.system,
    {
      limits: SYSTEM_LIMITS,
      exports: [{ name: "steward client events", subject: clientEvents(account), type: "stream" }],
    },
    { signer: keys.operator },
  );
  const stored = storedAccount(account);
  const revocations = stored ? jwtClaims<Account>(stored).nats.revocations : undefined;
  const accountJwt = await encodeAccount(
    STEWARD_ACCOUNT,
    keys.account,
    {
      ...stewardAccountClaims(account, keys.accountSigning.getPublicKey(), system),
      ...(revocations && Object.keys(revocations).length > 0 ? { revocations } : {}),
    },
    { signer: keys.operator },
  );
  const issuerAccount = {
    name: STEWARD_ACCOUNT,
    publicKey: account,
    signingSeed: seedOf(keys.accountSigning),
  };

  const users: { role: OperatorRole; name: string; permissions: Permissions }[] = [
    { role: "hub", name: "hub", permissions: hubPermissions() },
    { role: "viewer", name: "viewer", permissions: viewerPermissions(identities.viewer) },
    ...taskAgents.map((agent) => ({
      role: "task-agent" as const,
      name: agent,
      permissions: taskAgentPermissions(identities.taskAgent(agent)),
    })),
    { role: "enrol", name: "enrol", permissions: enrolmentPermissions() },
  ];
  const credentials: PlannedCredential[] = [];
  for (const user of users) {
    const path = operatorCredentialsPath(user.role, user.name);
    const existing = seedIn(path);
    const pair = existing ? keyPair(existing) : createUser();
    const jwt = await signUser(
      { account: issuerAccount },
      userJwtName(user.role, user.name),
      pair.getPublicKey(),
      user.permissions,
    );
    const text = new TextDecoder().decode(fmtCreds(jwt, pair));
    files.push({ path, mode: 0o600, content: `${credentialsLine(user.role, user.name)}\n${text}` });
    credentials.push({
      role: user.role,
      name: user.name,
      publicKey: pair.getPublicKey(),
      credentials: path,
      created: existing === undefined,
    });
  }
  const systemUserJwt = await encodeUser("steward hub (system)", keys.systemUser, keys.system);
  const issuer: NatsIssuer = {
    operator: { publicKey: operator, signingSeed: seedOf(keys.operatorSigning) },
    account: issuerAccount,
    system: { publicKey: system, userJwt: systemUserJwt, userSeed: seedOf(keys.systemUser) },
  };
  files.push({
    path: ISSUER_FILE,
    mode: 0o600,
    content: `${JSON.stringify({ kind: ISSUER_KIND, note: ISSUER_NOTE, ...issuer }, null, 2)}\n`,
  });

  const configOf = (member: ServerMember) => [
    "# nats-server configuration for steward (operator mode), written by `steward nats config`.",
    "# Users are not listed here: the server trusts the operator below, and the hub signs each",
    "# admitted node's user JWT. Keep the jwt/ directory: it holds the account as the hub last",
    "# updated it (the keys it revoked).",
    ...serverBasics(member, input.tls, input.fsync),
    `operator: ${operatorJwt}`,
    `system_account: ${system}`,
    "resolver: {",
    "  type: full",
    `  dir: ${JSON.stringify(member.resolverDir)}`,
    "  allow_delete: false",
    '  interval: "2m"',
    "}",
    "resolver_preload: {",
    `  # ${SYSTEM_ACCOUNT}`,
    `  ${system}: ${systemJwt}`,
    `  # ${STEWARD_ACCOUNT}`,
    `  ${account}: ${accountJwt}`,
    "}",
    "",
  ];
  const servers = plannedServers(members, configOf, files);
  const first = servers[0]!;
  return {
    dir: input.dir,
    serverConfig: first.config,
    storeDir: first.storeDir,
    resolverDir: first.resolverDir,
    listen: first.listen,
    servers,
    operator,
    account,
    credentials,
    issuerFile: ISSUER_FILE,
    files,
  };
}

/** The first line of a `.creds` file `steward nats config` writes: whose they are (the nats CLI skips it). */
export function credentialsLine(role: OperatorRole, name: string): string {
  return `# steward ${role} ${name}: NATS credentials from \`steward nats config\`; keep this file 0600`;
}

const ISSUER_KIND = "StewardNatsIssuer";
const ISSUER_NOTE =
  "the hub's signing keys (steward hub --nats-issuer): keep this file 0600, on the hub's machine only";

const SEED = /^S[OAU][A-Z2-7]{56}$/;

/**
 * The seed an earlier run wrote in `dir/path`: a key file (a comment, then the seed) or a `.creds`
 * file (its seed block). Undefined when there is no file; UsageError when it holds no seed.
 */
export function readOperatorSeed(dir: string, path: string): string | undefined {
  const file = join(dir, path);
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, "utf8");
  const block = /-----BEGIN USER NKEY SEED-----\s*([^\s-]+)\s*------END USER NKEY SEED------/.exec(text);
  const seed =
    block?.[1] ??
    text
      .split("\n")
      .map((line) => line.trim())
      .find((line) => SEED.test(line));
  if (!seed || !SEED.test(seed))
    throw new UsageError(`${file} holds no nkey seed: move it away or fix it, then run again`);
  return seed;
}

/**
 * The account JWT the servers keep for `account` under `dir/jwt` — one resolver directory, or one
 * per server of a cluster (`jwt/nats-N/`) — the newest by its issue time; undefined when none has it.
 */
export function storedAccountJwt(dir: string, account: string): string | undefined {
  const root = join(dir, "jwt");
  if (!existsSync(root)) return undefined;
  const dirs = [
    root,
    ...readdirSync(root, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(root, e.name)),
  ];
  const stored = dirs
    .map((resolver) => join(resolver, `${account}.jwt`))
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file, "utf8").trim());
  return stored.sort((a, b) => jwtClaims(b).iat - jwtClaims(a).iat)[0];
}

/** Writes every file of the plan atomically (temporary name, then rename); secrets 0600, directories 0700. */
export function writeOperatorConfig(plan: OperatorConfigPlan): void {
  writeConfigFiles(
    plan.dir,
    plan.servers.flatMap((server) => [server.storeDir, server.resolverDir]),
    plan.files,
  );
}

/** The issuer file could not be used: missing, readable by others, or not one `steward nats config` wrote. */
export class NatsIssuerError extends EnvironmentError {
  override readonly name = "NatsIssuerError";
  constructor(message: string, data: Record<string, unknown> = {}) {
    super(message, { code: "E_NATS_ISSUER", data });
  }
}

/** Reads and checks the hub's issuer file (`--nats-issuer FILE`). */
export function readNatsIssuer(file: string): NatsIssuer {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new NatsIssuerError(
      `cannot read --nats-issuer ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)} — pass the ${ISSUER_FILE} that \`steward nats config\` wrote`,
      { file },
    );
  }
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) !== 0)
    throw new NatsIssuerError(
      `--nats-issuer ${file} is readable by others (mode ${mode.toString(8)}): it holds signing keys — run \`chmod 600 ${file}\``,
      { file, mode },
    );
  let value: Partial<NatsIssuer> & { kind?: string };
  try {
    value = JSON.parse(text) as typeof value;
  } catch {
    value = {};
  }
  const ok =
    value.kind === ISSUER_KIND &&
    typeof value.account?.signingSeed === "string" &&
    value.account.signingSeed.startsWith("SA") &&
    typeof value.account.publicKey === "string" &&
    typeof value.operator?.signingSeed === "string" &&
    value.operator.signingSeed.startsWith("SO") &&
    typeof value.system?.userJwt === "string" &&
    typeof value.system.userSeed === "string";
  if (!ok)
    throw new NatsIssuerError(
      `--nats-issuer ${file} is not the hub's issuer file: pass the ${ISSUER_FILE} that \`steward nats config\` wrote (not a .creds file)`,
      { file },
    );
  return {
    operator: value.operator!,
    account: value.account!,
    system: value.system!,
  };
}

/** The system-account user's credentials of an issuer, as a `.creds` text (for the claims update service). */
export function systemCreds(issuer: NatsIssuer): Uint8Array {
  return fmtCreds(issuer.system.userJwt, keyPair(issuer.system.userSeed));
}
