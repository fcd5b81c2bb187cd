/**
 * Checking an incoming bundle. The common case (a valid bundle) is decided by the Bundle schema
 * compiled ahead of time (bundle-validator.generated.ts, from the same schemas); only an invalid
 * bundle pays for compiling the schemas, to say precisely what is wrong and where.
 */
import { StewardError } from "../model/errors.js";
import type { Bundle } from "../model/generated.js";
import { validate as bundleIsValid } from "./bundle-validator.generated.js";

/** The bundle does not match the agent schema. Nothing was applied. */
export class InvalidBundleError extends StewardError {
  override readonly name = "InvalidBundleError";
  constructor(message: string, findings: string[]) {
    super("E_BUNDLE", message, { data: { findings } });
  }
}

/** The bundle is for another node than this agent's. Nothing was applied. */
export class WrongNodeError extends StewardError {
  override readonly name = "WrongNodeError";
  constructor(bundleNode: string, agentNode: string) {
    super(
      "E_WRONG_NODE",
      `bundle is for node "${bundleNode}" but this agent is node "${agentNode}": send it to "${bundleNode}", or run the agent with --node ${bundleNode}`,
      { data: { bundleNode, agentNode } },
    );
  }
}

/** Returns the value as a Bundle, or throws InvalidBundleError naming each problem with its path. */
export async function checkBundle(value: unknown, source = "bundle"): Promise<Bundle> {
  if ((bundleIsValid as (data: unknown) => boolean)(value)) return value as Bundle;
  const { AGENT_SCHEMA_ID, schemaFindings, validatorFor } = await import("../model/schema.js");
  const findings = schemaFindings(validatorFor(AGENT_SCHEMA_ID, "Bundle"), value).map(
    (finding) => `${finding.message}${finding.fix ? ` (${finding.fix})` : ""}`,
  );
  const [first = "does not match the Bundle schema", ...rest] = findings;
  throw new InvalidBundleError(
    `${source} is not a valid bundle: ${first}${rest.length > 0 ? ` (and ${rest.length} more)` : ""}`,
    findings,
  );
}

/** Parses bundle JSON text, refusing text that is not JSON with a one-line error. */
export async function parseBundle(text: string, source = "bundle"): Promise<Bundle> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InvalidBundleError(`${source} is not JSON: ${(error as Error).message}`, []);
  }
  return checkBundle(value, source);
}
