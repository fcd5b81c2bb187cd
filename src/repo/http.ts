/**
 * The HTTP client isomorphic-git fetches and pushes with: node:http(s) with a timeout, so an
 * unreachable or stalled remote fails the sync (and is retried with backoff) instead of hanging it.
 * Redirects are not followed: a fleet remote is configured with its final URL.
 */
import http from "node:http";
import https from "node:https";
import type { HttpClient } from "isomorphic-git";

/** An isomorphic-git HttpClient over node:http(s); `timeoutMs` bounds every period of socket silence. */
export function nodeHttpClient(options: { timeoutMs?: number } = {}): HttpClient {
  const timeoutMs = options.timeoutMs ?? 30_000;
  return {
    async request({ url, method = "GET", headers = {}, body }) {
      const chunks: Buffer[] = [];
      if (body) for await (const chunk of body) chunks.push(Buffer.from(chunk));
      const payload = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
      const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const client = url.startsWith("https:") ? https : http;
        const request = client.request(url, { method, headers }, resolve);
        request.setTimeout(timeoutMs, () =>
          request.destroy(
            Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: "ETIMEDOUT" }),
          ),
        );
        request.on("error", reject);
        request.end(payload);
      });
      const responseHeaders: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers))
        if (value !== undefined) responseHeaders[name] = Array.isArray(value) ? value.join(", ") : value;
      return {
        url,
        method,
        statusCode: response.statusCode ?? 0,
        statusMessage: response.statusMessage ?? "",
        headers: responseHeaders,
        body: response as unknown as AsyncIterableIterator<Uint8Array>,
      };
    },
  };
}
