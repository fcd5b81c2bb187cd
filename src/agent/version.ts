import { readFileSync } from "node:fs";

declare const STEWARD_AGENT_VERSION: string | undefined;

/**
 * The agent's version: injected by the single-file build (esbuild `define` of STEWARD_AGENT_VERSION),
 * else read from package.json next to src/ or dist/.
 */
export const AGENT_VERSION: string = (() => {
  if (typeof STEWARD_AGENT_VERSION === "string") return STEWARD_AGENT_VERSION;
  try {
    return (
      JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    ).version;
  } catch {
    return "unknown";
  }
})();
