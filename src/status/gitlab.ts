/**
 * Commit statuses on GitLab: `POST /api/v4/projects/:id/statuses/:sha` with `state`, `name`,
 * `description` and `target_url` (https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit),
 * authenticated with a `PRIVATE-TOKEN` (personal, project or group access token with `api` scope).
 */
import { type CommitState, type CommitStatus, fitDescription, type StatusWriter } from "../hub/status.js";
import { apiBase, postJson } from "./http.js";

/** GitLab stores descriptions in a 255-character column. */
export const GITLAB_DESCRIPTION_LIMIT = 255;

export const GITLAB_URL = "https://gitlab.com";

/** GitLab's states: a rollout in progress is `running`; GitLab has no `error`, so it is `failed` too. */
const GITLAB_STATE: Record<CommitState, string> = {
  pending: "running",
  success: "success",
  failure: "failed",
  error: "failed",
};

export interface GitlabStatusOptions {
  /** Numeric project id or `group/name` path. */
  project: string;
  /** The GitLab instance (`https://gitlab.example.com`) or its API base (`.../api/v4`). */
  url?: string;
  token: string;
  now?: () => number;
  fetch?: typeof fetch;
}

/** Writes commit statuses to one GitLab project. */
export class GitlabStatusWriter implements StatusWriter {
  readonly name: string;
  readonly descriptionLimit = GITLAB_DESCRIPTION_LIMIT;
  readonly #options: GitlabStatusOptions;
  readonly #api: string;

  constructor(options: GitlabStatusOptions) {
    this.#options = options;
    this.#api = apiBase(options.url ?? GITLAB_URL, "/api/v4");
    this.name = `gitlab:${new URL(this.#api).host}/${options.project}`;
  }

  async write(status: CommitStatus): Promise<void> {
    const { token } = this.#options;
    const state = GITLAB_STATE[status.state];
    await postJson({
      provider: this.name,
      url: `${this.#api}/projects/${encodeURIComponent(this.#options.project)}/statuses/${encodeURIComponent(status.sha)}`,
      headers: { "private-token": token },
      body: {
        state,
        name: status.context,
        description: fitDescription(status.description, GITLAB_DESCRIPTION_LIMIT, [token]),
        ...(status.targetUrl ? { target_url: status.targetUrl } : {}),
      },
      fetch: this.#options.fetch ?? fetch,
      now: this.#options.now ?? Date.now,
      secrets: [token],
      // GitLab answers 400 "Cannot transition status via :run from :running" when the state is
      // already the one posted (only the progress text changed): the state stands, nothing is lost.
      accept: (code, text) => code === 400 && text.includes(`from :${state}`),
    });
  }
}
