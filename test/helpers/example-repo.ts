/** The example fleet copied into a directory, its web nodes moved to free ports (other tests may hold the declared ones). */
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../agent/helpers.js";

/** Copies examples/repo to `dir`; returns the web nodes' new ports by node name. */
export async function exampleRepoOnFreePorts(dir: string): Promise<Map<string, number>> {
  cpSync(resolve("examples/repo"), dir, { recursive: true });
  const ports = new Map<string, number>();
  for (const node of ["web-1", "web-2"]) {
    const file = join(dir, "nodes", `${node}.yaml`);
    const port = await freePort();
    ports.set(node, port);
    writeFileSync(file, readFileSync(file, "utf8").replace(/httpPort: "\d+"/, `httpPort: "${port}"`));
  }
  return ports;
}
