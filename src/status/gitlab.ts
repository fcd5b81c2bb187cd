/**
 * Commit statuses on GitLab: `POST /api/v4/projects/:id/statuses/:sha` with `state`, `name`,
 * `description` and `target_url` (https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit),
 * authenticated with a `PRIVATE-TOKEN` (personal, project or group access token with `api` scope).
 */
import type { CommitState, CommitStatus } from "../hub/status.js";
import { type ForgeConnection, JsonForgeWriter } from "./http.js";

/** GitLab documents no limit; 255 characters keeps a description one readable line in its UI. */
export const GITLAB_DESCRIPTION_LIMIT = 255;

export const GITLAB_URL = "https://gitlab.com";

/** GitLab's states: a rollout in progress is `running`; GitLab has no `error`, so it is `failed` too. */
const GITLAB_STATE: Record<CommitState, string> = {
  pending: "running",
  success: "success",
  failure: "failed",
  error: "failed",
};

export interface GitlabStatusOptions extends ForgeConnection {
  /** Numeric project id or `group/name` path. */
  project: string;
  /** The GitLab instance (`https://gitlab.example.com`) or its API base (`.../api/v4`). */
  url?: string;
}

/** Writes commit statuses to one GitLab project. */
export class GitlabStatusWriter extends JsonForgeWriter {
  readonly name: string;
  readonly descriptionLimit = GITLAB_DESCRIPTION_LIMIT;
  readonly #path: string;

  constructor(options: GitlabStatusOptions) {
    super(options.url ?? GITLAB_URL, "/api/v4", options);
    this.name = `gitlab:${new URL(this.api).host}/${options.project}`;
    this.#path = `/projects/${encodeURIComponent(options.project)}/statuses`;
  }

  async write(status: CommitStatus): Promise<void> {
    const state = GITLAB_STATE[status.state];
    await this.post(
      `${this.#path}/${encodeURIComponent(status.sha)}`,
      { "private-token": this.token },
      {
        state,
        name: status.context,
        description: this.description(status),
        ...(status.targetUrl ? { target_url: status.targetUrl } : {}),
      },
      // GitLab answers 400 "Cannot transition status via :run from :running" when the state is
      // already the one posted (only the progress text changed): the state stands, nothing is lost.
      (code, text) => code === 400 && text.includes(`from :${state}`),
    );
  }
}
