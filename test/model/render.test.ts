/**
 * Rendering and hashing: the hash covers what the agent applies (content, not where the YAML lives),
 * is the sha256 of the instance spec's canonical JSON, and `${node...}` references are filled per node.
 */
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { canonicalJson, contentHash } from "../../src/model/canonical.js";
import {
  type AnalysisCache,
  directorySource,
  type LoadResult,
  loadRepo,
  type RepoSource,
} from "../../src/model/load.js";
import type { Instance } from "../../src/model/render.js";
import { nodeYaml, tempRepo } from "../helpers/repo.js";

const web = `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      role: web
  version: "1.2.0"
  resources:
    - kind: file
      name: config
      path: /srv/web/config.json
      content: '{"port": \${node.vars.port}, "node": "\${node.name}", "version": "\${assignment.version}"}'
    - kind: file
      name: page
      path: /srv/web/index.html
      source: files/index.html
    - kind: command
      name: greet
      run: [sh, -c, 'echo $\${node.vars.port} \${HOME} \${node.labels.zone}']
  probes:
    - kind: http
      name: version
      url: http://127.0.0.1:\${node.vars.port}/version
      expectBody: "1.2.0"
`;

function fleet(extra: Record<string, string | Uint8Array> = {}): Record<string, string | Uint8Array> {
  return {
    "nodes/web-1.yaml": nodeYaml("web-1", { labels: { role: "web", zone: "a" }, vars: { port: "8081" } }),
    "nodes/web-2.yaml": nodeYaml("web-2", { labels: { role: "web", zone: "b" }, vars: { port: "8082" } }),
    "assignments/web.yaml": web,
    "files/index.html": "<h1>hello</h1>\n",
    ...extra,
  };
}

async function load(dir: string): Promise<LoadResult> {
  const result = await loadRepo(directorySource(dir));
  expect(result.diagnostics).toEqual([]);
  return result;
}

function hashes(result: LoadResult): Record<string, string> {
  return Object.fromEntries([...result.desired!.instances].map(([key, instance]) => [key, instance.hash]));
}

function instance(result: LoadResult, key: string): Instance {
  const found = result.desired!.instances.get(key);
  if (!found) throw new Error(`no instance ${key}`);
  return found;
}

describe("render - instances and hashes", () => {
  it("render - the same content gives the same hashes, and each is the sha256 of the spec's canonical JSON", async () => {
    const first = await load(tempRepo(fleet()));
    const second = await load(tempRepo(fleet()));
    expect(hashes(first)).toEqual(hashes(second));
    expect(Object.keys(hashes(first))).toEqual(["web@web-1", "web@web-2"]);
    for (const rendered of first.desired!.instances.values()) {
      expect(rendered.hash).toBe(contentHash(rendered.spec));
      expect(rendered.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
    expect(instance(first, "web@web-1").hash).not.toBe(instance(first, "web@web-2").hash);
  });

  it("render - an assignment that refers to nothing of the node shares one resources, probes and dependsOn array between its instances", async () => {
    const plain = `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: plain
spec:
  selector:
    matchLabels:
      role: web
  resources:
    - kind: file
      name: motd
      path: /srv/motd
      content: hello
  probes:
    - kind: http
      name: up
      url: http://127.0.0.1:8080/
`;
    const result = await load(tempRepo(fleet({ "assignments/plain.yaml": plain })));
    const one = instance(result, "plain@web-1");
    const two = instance(result, "plain@web-2");
    expect(one.spec.resources).toBe(two.spec.resources);
    expect(one.spec.probes).toBe(two.spec.probes);
    expect(one.spec.dependsOn).toBe(two.spec.dependsOn);
    expect(one.spec.node).toBe("web-1");
    expect(one.hash).toBe(contentHash(one.spec));
    expect(one.hash).not.toBe(two.hash);
    // The templated assignment's arrays are each node's own.
    expect(instance(result, "web@web-1").spec.resources).not.toBe(
      instance(result, "web@web-2").spec.resources,
    );
  });

  it("render - renaming or moving the YAML file, or reordering its keys, changes no hash", async () => {
    const dir = tempRepo(fleet());
    const before = hashes(await load(dir));
    renameSync(join(dir, "assignments/web.yaml"), join(dir, "web-tier.yml"));
    const moved = await load(dir);
    expect(hashes(moved)).toEqual(before);
    expect(instance(moved, "web@web-1").file).toBe("web-tier.yml");
    // The same assignment with its keys in another order and comments added: the same instances.
    const original = web.split("\n");
    const reordered = [
      "# the web tier",
      ...original.slice(2, 4),
      original[1],
      original[0],
      ...original.slice(4).map((line) => line.replace('version: "1.2.0"', 'version: "1.2.0" # released')),
    ].join("\n");
    expect(reordered).toContain("kind: Assignment\napiVersion: steward.dev/v1");
    writeFileSync(join(dir, "web-tier.yml"), reordered);
    expect(hashes(await load(dir))).toEqual(before);
  });

  it("render - a changed source file changes the hash, and changing it back restores it", async () => {
    const dir = tempRepo(fleet());
    const before = hashes(await load(dir));
    writeFileSync(join(dir, "files/index.html"), "<h1>hello, world</h1>\n");
    const changed = await load(dir);
    expect(instance(changed, "web@web-1").hash).not.toBe(before["web@web-1"]);
    expect(instance(changed, "web@web-1").spec.resources[1]).toMatchObject({
      name: "page",
      content: "<h1>hello, world</h1>\n",
    });
    writeFileSync(join(dir, "files/index.html"), "<h1>hello</h1>\n");
    expect(hashes(await load(dir))).toEqual(before);
  });

  it("render - node and assignment references are filled per node; $${ is a literal ${ and shell ${VAR} is left alone", async () => {
    const result = await load(tempRepo(fleet()));
    const one = instance(result, "web@web-1").spec;
    const two = instance(result, "web@web-2").spec;
    expect(one.resources[0]).toMatchObject({
      content: '{"port": 8081, "node": "web-1", "version": "1.2.0"}',
    });
    expect(two.resources[0]).toMatchObject({
      content: '{"port": 8082, "node": "web-2", "version": "1.2.0"}',
    });
    expect(one.resources[2]).toMatchObject({ run: ["sh", "-c", "echo ${node.vars.port} ${HOME} a"] });
    expect(one.probes[0]).toMatchObject({ url: "http://127.0.0.1:8081/version" });
    expect(two.probes[0]).toMatchObject({ url: "http://127.0.0.1:8082/version" });
  });

  it("render - a source file is inlined as content (base64 when it is not UTF-8) and every resource is named", async () => {
    const result = await load(tempRepo(fleet({ "files/index.html": new Uint8Array([0xff, 0x00, 0x41]) })));
    const spec = instance(result, "web@web-1").spec;
    expect(spec.resources[1]).toEqual({
      kind: "file",
      name: "page",
      path: "/srv/web/index.html",
      content: Buffer.from([0xff, 0x00, 0x41]).toString("base64"),
      encoding: "base64",
    });
    expect(spec.resources.every((r) => typeof r.name === "string")).toBe(true);
    expect(spec).toMatchObject({ assignment: "web", node: "web-1", state: "running", roots: ["/srv"] });
  });

  it("render - the hash is an ordinary property to JSON, spreads and structuredClone, and stays the same", async () => {
    const result = await load(tempRepo(fleet()));
    const rendered = instance(result, "web@web-1");
    const copies = [
      JSON.parse(JSON.stringify(rendered)).hash,
      { ...rendered }.hash,
      structuredClone(rendered).hash,
    ];
    expect(copies).toEqual([rendered.hash, rendered.hash, rendered.hash]);
    expect(Object.keys(rendered)).toContain("hash");
    expect(Object.getOwnPropertyDescriptor(rendered, "hash")).toMatchObject({
      value: rendered.hash,
      enumerable: true,
    });
  });

  it("render - canonical JSON sorts keys at every level and leaves out undefined members", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { f: 1, e: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[3,{"e":2,"f":1}]},"b":1}',
    );
  });

  it("render - with an analysis cache, unchanged instances are returned as they were and a changed node is rendered again", async () => {
    const files = new Map<string, string>(Object.entries(fleet()) as [string, string][]);
    let version = 0;
    const ids = new Map<string, string>();
    const source: RepoSource = {
      files: () => [...files.keys()].map((path) => ({ path, id: ids.get(path) ?? `${path}@0` })),
      read: (file) => Buffer.from(files.get(file.path)!),
    };
    const cache: AnalysisCache = new Map();
    const first = await loadRepo(source, { cache });
    const again = await loadRepo(source, { cache });
    expect(instance(again, "web@web-1")).toBe(instance(first, "web@web-1"));
    files.set(
      "nodes/web-2.yaml",
      nodeYaml("web-2", { labels: { role: "web", zone: "b" }, vars: { port: "9092" } }),
    );
    ids.set("nodes/web-2.yaml", `nodes/web-2.yaml@${++version}`);
    const changed = await loadRepo(source, { cache });
    expect(instance(changed, "web@web-1")).toBe(instance(first, "web@web-1"));
    expect(instance(changed, "web@web-2")).not.toBe(instance(first, "web@web-2"));
    expect(instance(changed, "web@web-2").spec.probes[0]).toMatchObject({
      url: "http://127.0.0.1:9092/version",
    });
  });
});
