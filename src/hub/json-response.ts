/**
 * A JSON answer of the hub's HTTP server, the same for every route: pretty-printed, never sniffed
 * as anything else, never cached (it says how things stand now), and varying with `Accept` (the
 * same paths serve pages to browsers).
 */
import type { ServerResponse } from "node:http";

/** Sends `body` as JSON with `status`. */
export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body, null, 2)}\n`;
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    vary: "Accept",
  });
  response.end(text);
}
