import type { Assignment, Fleet, Node } from "./generated.js";
import type { DocumentKind } from "./schema.js";

/** The one file whose Fleet document counts, at the root of the repository. */
export const FLEET_FILE = "steward.yaml";

/** A schema-valid document and where it came from. */
export interface SourcedDocument<T> {
  file: string;
  /** Index of the document among the file's documents (`---` separated), from 0. */
  index: number;
  value: T;
}

export type NodeDocument = SourcedDocument<Node>;
export type AssignmentDocument = SourcedDocument<Assignment>;
export type FleetDocument = SourcedDocument<Fleet>;

/** Any document of the repo, valid or not: enough to report on it and to avoid cascading errors. */
export interface AnyDocument extends SourcedDocument<unknown> {
  kind?: DocumentKind;
  name?: string;
  /** False when the document failed schema validation; it then takes no part in semantic checks. */
  valid: boolean;
}
