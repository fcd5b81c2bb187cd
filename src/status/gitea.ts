/**
 * Commit statuses on Gitea and Forgejo: `POST /api/v1/repos/{owner}/{repo}/statuses/{sha}` with a
 * `CreateStatusOption` body (`state`, `context`, `description`, `target_url`; see the instance's
 * /api/swagger, operation `repoCreateStatus`), authenticated with `Authorization: token …`.
 */
import { type CommitStatus, fitDescription, type StatusWriter } from "../hub/status.js";
import { apiBase, postJson } from "./http.js";

/** Gitea has no documented limit; keep descriptions as short as GitLab's column. */
export const GITEA_DESCRIPTION_LIMIT = 255;

export interface GiteaStatusOptions {
  owner: string;
  repo: string;
  /** The instance (`https://gitea.example.com`) or its API base (`.../api/v1`). There is no default. */
  url: string;
  token: string;
  now?: () => number;
  fetch?: typeof fetch;
}

/** Writes commit statuses to one Gitea or Forgejo repository. Gitea's states match ours one to one. */
export class GiteaStatusWriter implements StatusWriter {
  readonly name: string;
  readonly descriptionLimit = GITEA_DESCRIPTION_LIMIT;
  readonly #options: GiteaStatusOptions;
  readonly #api: string;

  constructor(options: GiteaStatusOptions) {
    this.#options = options;
    this.#api = apiBase(options.url, "/api/v1");
    this.name = `gitea:${new URL(this.#api).host}/${options.owner}/${options.repo}`;
  }

  async write(status: CommitStatus): Promise<void> {
    const { owner, repo, token } = this.#options;
    const path = [owner, repo].map(encodeURIComponent).join("/");
    await postJson({
      provider: this.name,
      url: `${this.#api}/repos/${path}/statuses/${encodeURIComponent(status.sha)}`,
      headers: { authorization: `token ${token}` },
      body: {
        state: status.state,
        context: status.context,
        description: fitDescription(status.description, GITEA_DESCRIPTION_LIMIT, [token]),
        ...(status.targetUrl ? { target_url: status.targetUrl } : {}),
      },
      fetch: this.#options.fetch ?? fetch,
      now: this.#options.now ?? Date.now,
      secrets: [token],
    });
  }
}
