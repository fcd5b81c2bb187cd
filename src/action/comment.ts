/**
 * The plan as one pull request comment that later runs update instead of adding another: the
 * comment is found by a hidden marker on its first line. Uses the REST API through @octokit/rest
 * (`GITHUB_API_URL`, so GitHub Enterprise Server works too).
 */
import { Octokit } from "@octokit/rest";
import { StewardError } from "../model/errors.js";

/** GitHub refuses comment bodies over 65,536 characters. */
export const COMMENT_LIMIT_CHARS = 65_536;

/** The hidden marker of the Action's comment for the fleet repository at `repoPath` in the workspace. */
export function commentMarker(repoPath: string): string {
  // One comment per fleet repository, so two steps checking two fleets do not overwrite each other.
  return repoPath === ""
    ? "<!-- steward-plan -->"
    : `<!-- steward-plan path=${encodeURIComponent(repoPath)} -->`;
}

/** Where the comment goes. */
export interface CommentTarget {
  apiUrl: string;
  token: string;
  owner: string;
  repo: string;
  issueNumber: number;
}

/** GitHub did not take the comment (a fork's read-only token, a missing permission, an outage). */
export class CommentError extends StewardError {
  override readonly name = "CommentError";
  constructor(message: string, status: number | undefined, cause: unknown) {
    super("E_ACTION_COMMENT", message, { data: { status }, cause });
  }
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Creates the comment `marker` + `body` on the pull request, or updates the one whose first line is
 * `marker`. Returns what it did and the comment's page. Throws CommentError.
 */
export async function upsertComment(
  target: CommentTarget,
  marker: string,
  body: string,
): Promise<{ action: "created" | "updated" | "unchanged"; url: string }> {
  const octokit = new Octokit({
    auth: target.token,
    baseUrl: target.apiUrl,
    userAgent: "steward-action",
    log: silent,
  });
  const where = { owner: target.owner, repo: target.repo };
  const text = `${marker}\n${body}`;
  try {
    const comments = await octokit.paginate(octokit.rest.issues.listComments, {
      ...where,
      issue_number: target.issueNumber,
      per_page: 100,
    });
    const own = comments.find((comment) => comment.body?.split("\n", 1)[0] === marker);
    if (own?.body === text) return { action: "unchanged", url: own.html_url };
    if (own) {
      const { data } = await octokit.rest.issues.updateComment({ ...where, comment_id: own.id, body: text });
      return { action: "updated", url: data.html_url };
    }
    const { data } = await octokit.rest.issues.createComment({
      ...where,
      issue_number: target.issueNumber,
      body: text,
    });
    return { action: "created", url: data.html_url };
  } catch (error) {
    const status = (error as { status?: number }).status;
    const hint =
      status === 403 || status === 401
        ? ": give the job `permissions: pull-requests: write` (a pull request from a fork gets a read-only token; the plan is in the job summary)"
        : "";
    throw new CommentError(
      `cannot comment on pull request #${target.issueNumber} of ${target.owner}/${target.repo}: ${status ? `HTTP ${status} ` : ""}${(error as Error).message}${hint}`,
      status,
      error,
    );
  }
}
