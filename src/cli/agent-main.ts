/**
 * Entry of the single-file agent (scripts/build-agent.mjs bundles it with esbuild): a `steward`
 * program with only the `agent` command, run with plain `node` on a host:
 * `node steward-agent.mjs agent apply --node NAME --bundle - --json`.
 */
import { AGENT_VERSION } from "../agent/version.js";
import { agentMain } from "./agent.js";
import { processIo } from "./io.js";

agentMain(process.argv.slice(2), processIo(), AGENT_VERSION).then((code) => {
  process.exitCode = code;
});
