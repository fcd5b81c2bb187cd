/**
 * A fake forge for tests: a local node:http server that checks every request against the forge's
 * published contract and answers as that contract says.
 *
 * - GitHub: every route of the OpenAPI description in `@octokit/openapi`
 *   (generated/api.github.com.json). The request's method and path must match an operation, its
 *   path parameters and JSON body must validate against the operation's schemas (ajv, `$ref`s
 *   resolved inside the description); an unknown route gets 404 and an invalid body 422, as GitHub
 *   does; query parameters the operation declares must match their schemas. Each answer is validated
 *   against the operation's response schema before it is sent. Implemented operations:
 *   `repos/create-commit-status`, `apps/create-installation-access-token` (verifying the App's
 *   RS256 JWT), and the pull request comments the GitHub Action keeps: `issues/list-comments`
 *   (paginated with `per_page`/`page` and a `Link` header, as GitHub does), `issues/create-comment`
 *   and `issues/update-comment`.
 * - GitLab and Gitea: small route contracts written from their documentation (cited below), checked
 *   the same way.
 *
 * Faults: `failNext(...)` answers the next requests with a rate limit (403 with `X-RateLimit-*`,
 * 429 with `Retry-After`) or a server error; `down()` closes the port (connection refused) and
 * `up()` opens it again. A request that breaks the contract, or an answer the fake itself got
 * wrong, is recorded in `problems`: tests assert it stays empty.
 */
import { createVerify, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo, Socket } from "node:net";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void;

/** A status as the fake forge stored it, in steward's vocabulary. */
export interface ForgeStatus {
  sha: string;
  context: string;
  /** The forge's own state word (GitLab: `running`, `failed`...). */
  state: string;
  description: string | null;
  targetUrl: string | null;
}

/** A request that matched a route of the contract. */
export interface ForgeRequest {
  method: string;
  path: string;
  operationId: string;
  params: Record<string, string | number>;
  headers: IncomingMessage["headers"];
  body: unknown;
  /** The status code the fake answered with. */
  answered: number;
}

/** A pull request (issue) comment as the fake GitHub stored it. */
export interface ForgeComment {
  id: number;
  /** `owner/repo`. */
  repository: string;
  issueNumber: number;
  body: string;
  /** Who wrote it: the token's bot for comments made through the API. */
  login: string;
  createdAt: string;
  updatedAt: string;
}

export type ForgeFault =
  /** GitHub's primary rate limit: 403 with `X-RateLimit-Remaining: 0` and the reset time. */
  | { kind: "rate-limit-403"; resetInSeconds: number }
  /** A secondary rate limit: 429 (GitHub, GitLab) with `Retry-After`. */
  | { kind: "rate-limit-429"; retryAfterSeconds: number }
  | { kind: "server-error"; status?: 500 | 502 | 503 }
  /** The forge refuses this one request (GitHub: 422 "No commit found for SHA"). */
  | { kind: "refuse" };

export interface FakeForge {
  /** What a provider is configured with: GitHub's API base; the GitLab or Gitea instance URL. */
  readonly url: string;
  readonly requests: ForgeRequest[];
  /** Contract breaches (by the client) and answers the fake got wrong (by the fake). */
  readonly problems: string[];
  /** Stored statuses, in the order they were created. */
  readonly statuses: ForgeStatus[];
  /** Stored issue comments (GitHub), in the order they were created; a test may add its own. */
  readonly comments: ForgeComment[];
  failNext(...faults: ForgeFault[]): void;
  /** Closes the port: requests are refused until `up()`. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

interface Exchange {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  /** The query string's parameters. */
  query: URLSearchParams;
  body: unknown;
  rawBody: string;
}

/** A forge's contract: how it routes, validates and answers. */
interface Contract {
  handle(exchange: Exchange, forge: ForgeState): Reply;
}

interface ForgeState {
  url: string;
  now: () => number;
  statuses: ForgeStatus[];
  comments: ForgeComment[];
  requests: ForgeRequest[];
  problems: string[];
  faults: ForgeFault[];
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? e.keyword}`).join("; ");
}

function newAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  return ajv;
}

function tokenOf(headers: IncomingMessage["headers"]): string | undefined {
  const header = headers.authorization;
  const match = header ? /^(?:token|bearer)\s+(\S+)$/i.exec(header) : null;
  return match?.[1];
}

/** Compiles a path template (`/repos/{owner}/{repo}` or `/projects/:id`) into a matcher. */
function pathMatcher(template: string, multiSegment: ReadonlySet<string> = new Set()) {
  const names: string[] = [];
  const source = template
    .split("/")
    .map((segment) => {
      const name = /^\{(\w+)\}$/.exec(segment)?.[1] ?? /^:(\w+)$/.exec(segment)?.[1];
      if (!name) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      names.push(name);
      return multiSegment.has(name) ? "(.+)" : "([^/]+)";
    })
    .join("/");
  const regex = new RegExp(`^${source}$`);
  return {
    literalLength: template.replace(/\{\w+\}|:\w+/g, "").length,
    match(path: string): Record<string, string> | undefined {
      const found = regex.exec(path);
      if (!found) return undefined;
      return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1]!)]));
    },
  };
}

function coerce(value: string, schema: { type?: string } | undefined): string | number {
  return schema?.type === "integer" && /^-?\d+$/.test(value) ? Number(value) : value;
}

// ---------------------------------------------------------------------------------------------
// GitHub: the OpenAPI description

const GITHUB_SPEC_ID = "github";

interface OpenApiOperation {
  operationId: string;
  parameters?: ({ $ref: string } | OpenApiParameter)[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: unknown }> }>;
}

interface OpenApiParameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: { type?: string };
  "x-multi-segment"?: boolean;
}

interface OpenApiSpec {
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: {
    parameters: Record<string, OpenApiParameter>;
    responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
    examples: Record<string, { value: unknown }>;
  };
}

interface GithubRoute {
  method: string;
  template: string;
  operation: OpenApiOperation;
  parameters: OpenApiParameter[];
  matcher: ReturnType<typeof pathMatcher>;
}

let githubSpec: { spec: OpenApiSpec; ajv: Ajv; routes: GithubRoute[] } | undefined;

/** JSON Pointer escaping for one path segment. */
function pointer(segment: string): string {
  return segment.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Loads the description once per test process (13 MB: about half a second). */
function loadGithubSpec() {
  if (githubSpec) return githubSpec;
  const require = createRequire(import.meta.url);
  const file = require.resolve("@octokit/openapi/generated/api.github.com.json");
  const spec = JSON.parse(readFileSync(file, "utf8")) as OpenApiSpec;
  const ajv = newAjv();
  ajv.addSchema(spec, GITHUB_SPEC_ID);
  const routes: GithubRoute[] = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!operation?.operationId) continue;
      const parameters = (operation.parameters ?? []).map((p) =>
        "$ref" in p ? spec.components.parameters[p.$ref.split("/").pop()!]! : p,
      );
      const multi = new Set(parameters.filter((p) => p["x-multi-segment"]).map((p) => p.name));
      routes.push({
        method: method.toUpperCase(),
        template,
        operation,
        parameters,
        matcher: pathMatcher(template, multi),
      });
    }
  }
  // Literal routes win over templated ones (`/repos/{o}/{r}/pulls/comments` before `.../pulls/{n}`).
  routes.sort((a, b) => b.matcher.literalLength - a.matcher.literalLength);
  githubSpec = { spec, ajv, routes };
  return githubSpec;
}

function githubSchema(path: string): ValidateFunction {
  const { ajv } = loadGithubSpec();
  const validate = ajv.getSchema(`${GITHUB_SPEC_ID}#${path}`);
  if (!validate) throw new Error(`fake forge: no schema at ${path}`);
  return validate;
}

/** The validator of an operation's JSON answer for `status`, following a `$ref` to components/responses. */
function githubResponseSchema(route: GithubRoute, status: number): ValidateFunction | undefined {
  const response = route.operation.responses[String(status)];
  if (!response) return undefined;
  const base = response.$ref
    ? `/components/responses/${pointer(response.$ref.split("/").pop()!)}`
    : `/paths/${pointer(route.template)}/${route.method.toLowerCase()}/responses/${status}`;
  const content = response.$ref
    ? loadGithubSpec().spec.components.responses[response.$ref.split("/").pop()!]?.content
    : response.content;
  if (!content?.["application/json"]) return undefined;
  return githubSchema(`${base}/content/application~1json/schema`);
}

const GITHUB_DOCS = "https://docs.github.com/rest";

function githubError(status: number, message: string, headers?: Record<string, string>): Reply {
  const reply: Reply = { status, body: { message, documentation_url: GITHUB_DOCS } };
  if (headers) reply.headers = headers;
  return reply;
}

/** Verifies a GitHub App JWT (RS256, `iss` = App id, within its lifetime). */
function verifyAppJwt(jwt: string, app: GithubAppKey, now: number): string | undefined {
  const parts = jwt.split(".");
  if (parts.length !== 3) return "not a JWT";
  const [header, payload, signature] = parts as [string, string, string];
  const head = JSON.parse(Buffer.from(header, "base64url").toString()) as { alg?: string };
  if (head.alg !== "RS256") return `alg ${head.alg} is not RS256`;
  const ok = createVerify("RSA-SHA256")
    .update(`${header}.${payload}`)
    .verify(app.publicKey, Buffer.from(signature, "base64url"));
  if (!ok) return "signature does not verify with the App's public key";
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString()) as {
    iss?: string;
    iat?: number;
    exp?: number;
  };
  const seconds = Math.floor(now / 1000);
  if (claims.iss !== String(app.appId)) return `iss ${claims.iss} is not the App id ${app.appId}`;
  if (!claims.exp || claims.exp <= seconds) return "expired";
  if (!claims.iat || claims.iat > seconds + 60) return "issued in the future";
  if (claims.exp - claims.iat > 600) return "lives longer than 10 minutes";
  return undefined;
}

export interface GithubAppKey {
  appId: number;
  installationId: number;
  publicKey: string;
}

function githubFault(fault: ForgeFault, now: number): Reply {
  if (fault.kind === "rate-limit-403") {
    const reset = Math.floor(now / 1000) + fault.resetInSeconds;
    return githubError(403, "API rate limit exceeded for installation ID 1.", {
      "x-ratelimit-limit": "5000",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-used": "5000",
      "x-ratelimit-reset": String(reset),
      "x-ratelimit-resource": "core",
    });
  }
  if (fault.kind === "rate-limit-429")
    return githubError(
      429,
      "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
      {
        "retry-after": String(fault.retryAfterSeconds),
      },
    );
  if (fault.kind === "refuse")
    return {
      status: 422,
      body: {
        message: "Validation Failed",
        documentation_url: GITHUB_DOCS,
        errors: [{ resource: "Status", code: "custom", field: "sha", message: "No commit found for SHA" }],
      },
    };
  return githubError(fault.status ?? 500, "Server Error");
}

/** The login GitHub shows for comments made with a workflow's `GITHUB_TOKEN`. */
const ACTIONS_BOT = "github-actions[bot]";

/** An issue comment as GitHub answers it (the description's example, with the stored values). */
function commentBody(comment: ForgeComment, forge: ForgeState): Record<string, unknown> {
  const example = structuredClone(
    loadGithubSpec().spec.components.examples["issue-comment"]!.value,
  ) as Record<string, unknown>;
  const user = example.user as Record<string, unknown>;
  const api = `${forge.url}/repos/${comment.repository}`;
  return {
    ...example,
    id: comment.id,
    node_id: Buffer.from(`IssueComment${comment.id}`).toString("base64"),
    url: `${api}/issues/comments/${comment.id}`,
    html_url: `https://github.com/${comment.repository}/pull/${comment.issueNumber}#issuecomment-${comment.id}`,
    issue_url: `${api}/issues/${comment.issueNumber}`,
    body: comment.body,
    user: { ...user, login: comment.login, type: comment.login.endsWith("[bot]") ? "Bot" : "User" },
    created_at: comment.createdAt,
    updated_at: comment.updatedAt,
    author_association: comment.login === ACTIONS_BOT ? "NONE" : "MEMBER",
  };
}

/** The three comment operations: list (paginated like GitHub, `Link` header included), create, update. */
function issueComments(
  operationId: string,
  exchange: Exchange,
  params: Record<string, string | number>,
  forge: ForgeState,
): Reply {
  const repository = `${params.owner}/${params.repo}`;
  const at = new Date(forge.now()).toISOString().replace(/\.\d+Z$/, "Z");
  if (operationId === "issues/update-comment") {
    const comment = forge.comments.find((c) => c.id === params.comment_id && c.repository === repository);
    if (!comment) return githubError(404, "Not Found");
    comment.body = (exchange.body as { body: string }).body;
    comment.updatedAt = at;
    return { status: 200, body: commentBody(comment, forge) };
  }
  const issueNumber = Number(params.issue_number);
  if (operationId === "issues/create-comment") {
    const comment: ForgeComment = {
      id: Math.max(0, ...forge.comments.map((c) => c.id)) + 1,
      repository,
      issueNumber,
      body: (exchange.body as { body: string }).body,
      login: ACTIONS_BOT,
      createdAt: at,
      updatedAt: at,
    };
    forge.comments.push(comment);
    return {
      status: 201,
      body: commentBody(comment, forge),
      headers: { location: `${forge.url}/repos/${repository}/issues/comments/${comment.id}` },
    };
  }
  const all = forge.comments.filter((c) => c.repository === repository && c.issueNumber === issueNumber);
  // GitHub caps per_page at 100 and counts pages from 1.
  const perPage = Math.min(100, Math.max(1, Number(params.per_page ?? 30)));
  const page = Math.max(1, Number(params.page ?? 1));
  const last = Math.max(1, Math.ceil(all.length / perPage));
  const link = (n: number, rel: string) =>
    `<${forge.url}${exchange.path}?per_page=${perPage}&page=${n}>; rel="${rel}"`;
  const links: string[] = [];
  if (page > 1) links.push(link(1, "first"), link(page - 1, "prev"));
  if (page < last) links.push(link(page + 1, "next"), link(last, "last"));
  const reply: Reply = {
    status: 200,
    body: all.slice((page - 1) * perPage, page * perPage).map((c) => commentBody(c, forge)),
  };
  if (links.length > 0) reply.headers = { link: links.join(", ") };
  return reply;
}

function githubContract(options: { token?: string; app?: GithubAppKey }): Contract {
  const installationTokens = new Set<string>();
  const basicError = () => githubSchema("/components/schemas/basic-error");
  return {
    handle(exchange, forge) {
      const { routes, spec } = loadGithubSpec();
      let route: GithubRoute | undefined;
      let raw: Record<string, string> | undefined;
      for (const candidate of routes) {
        if (candidate.method !== exchange.method) continue;
        raw = candidate.matcher.match(exchange.path);
        if (raw) {
          route = candidate;
          break;
        }
      }
      if (!route || !raw) {
        forge.problems.push(`no operation for ${exchange.method} ${exchange.path}`);
        return githubError(404, "Not Found");
      }
      const params: Record<string, string | number> = {};
      for (const parameter of route.parameters.filter((p) => p.in === "path")) {
        const value = coerce(raw[parameter.name] ?? "", parameter.schema);
        params[parameter.name] = value;
        const ajv = loadGithubSpec().ajv;
        if (parameter.schema && !ajv.validate(parameter.schema, value)) {
          forge.problems.push(
            `${route.operation.operationId}: path parameter ${parameter.name}=${value}: ${ajv.errorsText()}`,
          );
          return githubError(404, "Not Found");
        }
      }
      for (const parameter of route.parameters.filter((p) => p.in === "query")) {
        const given = exchange.query.get(parameter.name);
        if (given === null) continue;
        const value = coerce(given, parameter.schema);
        params[parameter.name] = value;
        const ajv = loadGithubSpec().ajv;
        if (parameter.schema && !ajv.validate(parameter.schema, value)) {
          forge.problems.push(
            `${route.operation.operationId}: query parameter ${parameter.name}=${given}: ${ajv.errorsText()}`,
          );
          return githubError(422, `Invalid value for ${parameter.name}`);
        }
      }
      const record = (answered: number) =>
        forge.requests.push({
          method: exchange.method,
          path: exchange.path,
          operationId: route.operation.operationId,
          params,
          headers: exchange.headers,
          body: exchange.body,
          answered,
        });
      const requestBody = route.operation.requestBody;
      if (requestBody?.content["application/json"]) {
        if (exchange.body === undefined && (requestBody.required || exchange.rawBody !== "")) {
          forge.problems.push(
            `${route.operation.operationId}: body is not JSON: ${exchange.rawBody.slice(0, 80)}`,
          );
          record(400);
          return githubError(400, "Problems parsing JSON");
        }
        if (exchange.body !== undefined) {
          const validate = githubSchema(
            `/paths/${pointer(route.template)}/${route.method.toLowerCase()}/requestBody/content/application~1json/schema`,
          );
          if (!validate(exchange.body)) {
            forge.problems.push(
              `${route.operation.operationId}: invalid body: ${describeErrors(validate.errors)}`,
            );
            record(422);
            return {
              status: 422,
              body: {
                message: "Invalid request.",
                documentation_url: GITHUB_DOCS,
                errors: (validate.errors ?? []).map((e) => ({
                  resource: route.operation.operationId,
                  field: e.instancePath.slice(1),
                  code: "invalid",
                  message: e.message,
                })),
              },
            };
          }
        }
      }
      const token = tokenOf(exchange.headers);
      const authorized = token !== undefined && (token === options.token || installationTokens.has(token));
      const fault = forge.faults.shift();
      const reply = ((): Reply => {
        if (fault) return githubFault(fault, forge.now());
        switch (route.operation.operationId) {
          case "repos/create-commit-status": {
            if (!authorized) return githubError(401, "Bad credentials");
            const body = exchange.body as {
              state: string;
              context?: string;
              description?: string | null;
              target_url?: string | null;
            };
            // GitHub's documented limit, which the OpenAPI description does not encode.
            if ((body.description ?? "").length > 140)
              return {
                status: 422,
                body: {
                  message: "Validation Failed",
                  documentation_url: GITHUB_DOCS,
                  errors: [
                    {
                      resource: "Status",
                      code: "custom",
                      field: "description",
                      message: "description is too long (maximum is 140 characters)",
                    },
                  ],
                },
              };
            const example = structuredClone(spec.components.examples.status!.value) as Record<
              string,
              unknown
            >;
            const at = new Date(forge.now()).toISOString().replace(/\.\d+Z$/, "Z");
            const stored: ForgeStatus = {
              sha: String(params.sha),
              context: body.context ?? "default",
              state: body.state,
              description: body.description ?? null,
              targetUrl: body.target_url ?? null,
            };
            forge.statuses.push(stored);
            return {
              status: 201,
              body: {
                ...example,
                id: forge.statuses.length,
                url: `${forge.url}/repos/${params.owner}/${params.repo}/statuses/${params.sha}`,
                state: stored.state,
                description: stored.description,
                target_url: stored.targetUrl,
                context: stored.context,
                created_at: at,
                updated_at: at,
              },
            };
          }
          case "apps/create-installation-access-token": {
            const app = options.app;
            if (!app || params.installation_id !== app.installationId) return githubError(404, "Not Found");
            const problem = token ? verifyAppJwt(token, app, forge.now()) : "no JWT";
            if (problem) return githubError(401, `A JSON web token could not be decoded (${problem})`);
            const issued = `ghs_${randomBytes(18).toString("hex")}`;
            installationTokens.add(issued);
            return {
              status: 201,
              body: {
                token: issued,
                expires_at: new Date(forge.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, "Z"),
                permissions: { statuses: "write" },
                repository_selection: "selected",
              },
            };
          }
          case "issues/list-comments":
          case "issues/create-comment":
          case "issues/update-comment":
            if (!authorized) return githubError(401, "Bad credentials");
            return issueComments(route.operation.operationId, exchange, params, forge);
          default:
            return githubError(501, `fake forge: ${route.operation.operationId} is not implemented`);
        }
      })();
      // The fake must answer as the description says, or the test proves nothing.
      const validate = githubResponseSchema(route, reply.status) ?? basicError();
      if (validate && !validate(reply.body))
        forge.problems.push(
          `fake forge answered ${route.operation.operationId} ${reply.status} off-spec: ${describeErrors(validate.errors)}`,
        );
      record(reply.status);
      return reply;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// GitLab and Gitea: route contracts written from their documentation

interface RouteContract {
  method: string;
  template: string;
  operationId: string;
  params: Record<string, object>;
  body: object;
  response: object;
}

/** A commit id in a path, as both forges accept it. */
const SHA_PARAM = { type: "string", pattern: "^[0-9a-f]{7,64}$" };

/** A JSON body with exactly these fields, `state` required (both forges' status bodies). */
function statusBody(properties: Record<string, object>): object {
  return { type: "object", required: ["state"], additionalProperties: false, properties };
}

/**
 * GitLab "Set the pipeline status of a commit",
 * https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit:
 * `POST /projects/:id/statuses/:sha`; attributes `state` (required: pending, running, success,
 * failed, canceled, skipped), `ref`, `name` or `context`, `target_url`, `description`, `coverage`,
 * `pipeline_id`. Authentication: `PRIVATE-TOKEN` header or `Authorization: Bearer`
 * (https://docs.gitlab.com/api/rest/authentication/). Invalid parameters: 400 `{"error": "..."}`.
 */
const GITLAB_CREATE_STATUS: RouteContract = {
  method: "POST",
  template: "/api/v4/projects/:id/statuses/:sha",
  operationId: "gitlab/commit-statuses/create",
  params: {
    id: {
      anyOf: [
        { type: "string", pattern: "^\\d+$" },
        { type: "string", pattern: "^[^/]+(/[^/]+)+$" },
      ],
    },
    sha: SHA_PARAM,
  },
  body: statusBody({
    state: { enum: ["pending", "running", "success", "failed", "canceled", "skipped"] },
    ref: { type: "string" },
    name: { type: "string" },
    context: { type: "string" },
    target_url: { type: "string" },
    description: { type: "string" },
    coverage: { type: "number" },
    pipeline_id: { type: "integer" },
  }),
  // The response example of the same page.
  response: {
    type: "object",
    required: ["id", "sha", "status", "name", "created_at", "allow_failure", "author"],
    properties: {
      id: { type: "integer" },
      sha: { type: "string" },
      ref: { type: ["string", "null"] },
      status: { type: "string" },
      name: { type: "string" },
      target_url: { type: ["string", "null"] },
      description: { type: ["string", "null"] },
      coverage: { type: ["number", "null"] },
      created_at: { type: "string", format: "date-time" },
      started_at: { type: ["string", "null"] },
      finished_at: { type: ["string", "null"] },
      allow_failure: { type: "boolean" },
      author: {
        type: "object",
        required: ["id", "username", "name", "state", "web_url"],
        properties: {
          id: { type: "integer" },
          username: { type: "string" },
          name: { type: "string" },
          state: { type: "string" },
          avatar_url: { type: "string" },
          web_url: { type: "string" },
        },
      },
    },
  },
};

/**
 * Gitea/Forgejo "Create a commit status" (swagger operation `repoCreateStatus`, served by every
 * instance at /api/swagger; https://gitea.com/api/swagger#/repository/repoCreateStatus):
 * `POST /repos/{owner}/{repo}/statuses/{sha}` with body `CreateStatusOption` (`context`,
 * `description`, `state`: CommitStatusState = pending|success|error|failure|warning, `target_url`);
 * answers 201 `CommitStatus`. Authentication: `Authorization: token …`. Binding errors: 422
 * `APIValidationError` (`message`, `url`).
 */
const GITEA_CREATE_STATUS: RouteContract = {
  method: "POST",
  template: "/api/v1/repos/{owner}/{repo}/statuses/{sha}",
  operationId: "gitea/repoCreateStatus",
  params: {
    owner: { type: "string", minLength: 1 },
    repo: { type: "string", minLength: 1 },
    sha: SHA_PARAM,
  },
  body: statusBody({
    context: { type: "string" },
    description: { type: "string" },
    state: { enum: ["pending", "success", "error", "failure", "warning"] },
    target_url: { type: "string" },
  }),
  response: {
    type: "object",
    required: ["id", "status", "context", "created_at", "updated_at", "url"],
    properties: {
      id: { type: "integer" },
      status: { type: "string" },
      target_url: { type: "string" },
      description: { type: "string" },
      url: { type: "string" },
      context: { type: "string" },
      creator: { type: "object", properties: { id: { type: "integer" }, login: { type: "string" } } },
      created_at: { type: "string", format: "date-time" },
      updated_at: { type: "string", format: "date-time" },
    },
  },
};

function routeContract(
  contract: RouteContract,
  flavour: {
    authorized(headers: IncomingMessage["headers"]): boolean;
    unauthorized: Reply;
    notFound: Reply;
    invalid(message: string): Reply;
    fault(fault: ForgeFault, now: number): Reply;
    create(params: Record<string, string>, body: Record<string, unknown>, forge: ForgeState): Reply;
  },
): Contract {
  const ajv = newAjv();
  const matcher = pathMatcher(contract.template);
  const validateBody = ajv.compile(contract.body);
  const validateResponse = ajv.compile(contract.response);
  const validateParams = Object.fromEntries(
    Object.entries(contract.params).map(([name, schema]) => [name, ajv.compile(schema)]),
  );
  return {
    handle(exchange, forge) {
      const params = exchange.method === contract.method ? matcher.match(exchange.path) : undefined;
      if (!params) {
        forge.problems.push(`no route for ${exchange.method} ${exchange.path}`);
        return flavour.notFound;
      }
      const record = (answered: number) =>
        forge.requests.push({
          method: exchange.method,
          path: exchange.path,
          operationId: contract.operationId,
          params,
          headers: exchange.headers,
          body: exchange.body,
          answered,
        });
      for (const [name, validate] of Object.entries(validateParams)) {
        if (!validate(params[name])) {
          forge.problems.push(
            `${contract.operationId}: path parameter ${name}=${params[name]}: ${describeErrors(validate.errors)}`,
          );
          record(404);
          return flavour.notFound;
        }
      }
      if (!validateBody(exchange.body)) {
        const message = describeErrors(validateBody.errors);
        forge.problems.push(`${contract.operationId}: invalid body: ${message}`);
        const reply = flavour.invalid(message);
        record(reply.status);
        return reply;
      }
      const fault = forge.faults.shift();
      const reply = fault
        ? flavour.fault(fault, forge.now())
        : flavour.authorized(exchange.headers)
          ? flavour.create(params, exchange.body as Record<string, unknown>, forge)
          : flavour.unauthorized;
      if (reply.status === 201 && !validateResponse(reply.body))
        forge.problems.push(
          `fake forge answered ${contract.operationId} off-contract: ${describeErrors(validateResponse.errors)}`,
        );
      record(reply.status);
      return reply;
    },
  };
}

function genericFault(fault: ForgeFault, now: number, body: (message: string) => unknown): Reply {
  if (fault.kind === "rate-limit-429")
    return {
      status: 429,
      body: body("Retry later"),
      headers: { "retry-after": String(fault.retryAfterSeconds) },
    };
  if (fault.kind === "rate-limit-403")
    return {
      status: 403,
      body: body("rate limit exceeded"),
      headers: {
        "ratelimit-remaining": "0",
        "ratelimit-reset": String(Math.floor(now / 1000) + fault.resetInSeconds),
      },
    };
  if (fault.kind === "refuse") return { status: 404, body: body("404 Commit Not Found") };
  return { status: fault.status ?? 500, body: body("500 Internal Server Error") };
}

function iso(now: number): string {
  return new Date(now).toISOString();
}

function gitlabContract(options: { token: string; rejectSameState?: boolean }): Contract {
  const gitlabBody = (message: string) => ({ message });
  return routeContract(GITLAB_CREATE_STATUS, {
    authorized: (headers) => headers["private-token"] === options.token || tokenOf(headers) === options.token,
    unauthorized: { status: 401, body: { message: "401 Unauthorized" } },
    notFound: { status: 404, body: { error: "404 Not Found" } },
    invalid: (message) => ({ status: 400, body: { error: message } }),
    fault: (fault, now) => genericFault(fault, now, gitlabBody),
    create(params, body, forge) {
      const name = String(body.name ?? body.context ?? "default");
      const state = String(body.state);
      const previous = forge.statuses.filter((s) => s.sha === params.sha && s.context === name).at(-1);
      // GitLab's state machine refuses to enter the state a status is already in.
      if (options.rejectSameState && previous?.state === state) {
        const event =
          { running: "run", pending: "enqueue", success: "succeed", failed: "drop" }[state] ?? state;
        return { status: 400, body: { message: `Cannot transition status via :${event} from :${state}` } };
      }
      forge.statuses.push({
        sha: params.sha!,
        context: name,
        state,
        description: (body.description as string | undefined) ?? null,
        targetUrl: (body.target_url as string | undefined) ?? null,
      });
      return {
        status: 201,
        body: {
          id: forge.statuses.length,
          sha: params.sha,
          ref: null,
          status: state,
          name,
          target_url: body.target_url ?? null,
          description: body.description ?? null,
          coverage: null,
          created_at: iso(forge.now()),
          started_at: null,
          finished_at: null,
          allow_failure: false,
          author: {
            id: 1,
            username: "steward",
            name: "steward",
            state: "active",
            web_url: `${forge.url}/steward`,
          },
        },
      };
    },
  });
}

function giteaContract(options: { token: string }): Contract {
  const giteaBody = (message: string) => ({ message, url: "https://gitea.com/api/swagger" });
  return routeContract(GITEA_CREATE_STATUS, {
    authorized: (headers) => tokenOf(headers) === options.token,
    unauthorized: { status: 401, body: giteaBody("token is required") },
    notFound: { status: 404, body: giteaBody("not found") },
    invalid: (message) => ({ status: 422, body: giteaBody(message) }),
    fault: (fault, now) => genericFault(fault, now, giteaBody),
    create(params, body, forge) {
      const stored: ForgeStatus = {
        sha: params.sha!,
        context: String(body.context ?? ""),
        state: String(body.state),
        description: (body.description as string | undefined) ?? null,
        targetUrl: (body.target_url as string | undefined) ?? null,
      };
      forge.statuses.push(stored);
      const at = iso(forge.now());
      return {
        status: 201,
        body: {
          id: forge.statuses.length,
          status: stored.state,
          target_url: stored.targetUrl ?? "",
          description: stored.description ?? "",
          url: `${forge.url}/api/v1/repos/${params.owner}/${params.repo}/statuses/${params.sha}`,
          context: stored.context,
          creator: { id: 1, login: "steward" },
          created_at: at,
          updated_at: at,
        },
      };
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The server

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function startForge(contract: Contract, now: () => number, basePath = ""): Promise<FakeForge> {
  const sockets = new Set<Socket>();
  const state: ForgeState = {
    url: "",
    now,
    statuses: [],
    comments: [],
    requests: [],
    problems: [],
    faults: [],
  };
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const rawBody = await readBody(request);
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const url = new URL(request.url ?? "/", "http://fake");
    let reply: Reply;
    try {
      if (!url.pathname.startsWith(`${basePath}/`))
        throw new Error(`${url.pathname} is outside ${basePath}/`);
      const path = url.pathname.slice(basePath.length);
      reply = contract.handle(
        {
          method: request.method ?? "GET",
          path,
          headers: request.headers,
          query: url.searchParams,
          body,
          rawBody,
        },
        state,
      );
    } catch (error) {
      state.problems.push(`fake forge crashed: ${(error as Error).stack}`);
      reply = { status: 500, body: { message: "fake forge crashed" } };
    }
    response.writeHead(reply.status, { "content-type": "application/json; charset=utf-8", ...reply.headers });
    response.end(JSON.stringify(reply.body));
  };
  let server: Server = createServer();
  const listen = async (port: number) => {
    server = createServer((request, response) => void handle(request, response));
    server.on("connection", (socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    return (server.address() as AddressInfo).port;
  };
  const shut = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  const port = await listen(0);
  state.url = `http://127.0.0.1:${port}${basePath}`;
  let isUp = true;
  return {
    url: state.url,
    requests: state.requests,
    problems: state.problems,
    statuses: state.statuses,
    comments: state.comments,
    failNext: (...faults) => state.faults.push(...faults),
    async down() {
      if (!isUp) return;
      isUp = false;
      await shut();
    },
    async up() {
      if (isUp) return;
      await listen(port);
      isUp = true;
    },
    async close() {
      if (isUp) await shut();
      isUp = false;
    },
  };
}

/**
 * A GitHub API checked against the OpenAPI description; `token` and/or an App are accepted.
 * `basePath: "/api/v3"` serves it where GitHub Enterprise Server does.
 */
export function startGithubForge(
  options: { token?: string; app?: GithubAppKey; now?: () => number; basePath?: string } = {},
): Promise<FakeForge> {
  return startForge(githubContract(options), options.now ?? Date.now, options.basePath);
}

/** A GitLab instance (routes under /api/v4). `rejectSameState` mimics GitLab's state machine. */
export function startGitlabForge(options: {
  token: string;
  rejectSameState?: boolean;
  now?: () => number;
}): Promise<FakeForge> {
  return startForge(gitlabContract(options), options.now ?? Date.now);
}

/** A Gitea/Forgejo instance (routes under /api/v1). */
export function startGiteaForge(options: { token: string; now?: () => number }): Promise<FakeForge> {
  return startForge(giteaContract(options), options.now ?? Date.now);
}
