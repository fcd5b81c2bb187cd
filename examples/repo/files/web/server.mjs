// The demo web service: serves its configured version, so a probe can check that the version
// running is the version declared (correctness, not only liveness).
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

const config = JSON.parse(readFileSync(new URL("./config.json", import.meta.url), "utf8"));
const server = createServer((request, response) => {
  if (request.url === "/version") {
    response.writeHead(200, { "content-type": "text/plain" });
    response.end(`${config.version}\n`);
  } else if (request.url === "/healthz") {
    response.writeHead(200).end("ok\n");
  } else {
    response.writeHead(404).end();
  }
});
server.listen(config.port, "127.0.0.1", () =>
  console.log(`web ${config.version} on ${config.node} listening on ${config.port}`),
);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
