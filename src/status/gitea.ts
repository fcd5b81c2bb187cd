/**
 * Commit statuses on Gitea and Forgejo: `POST /api/v1/repos/{owner}/{repo}/statuses/{sha}` with a
 * `CreateStatusOption` body (`state`, `context`, `description`, `target_url`; see the instance's
 * /api/swagger, operation `repoCreateStatus`), authenticated with `Authorization: token …`.
 */
import type { CommitStatus } from "../hub/status.js";
import { type ForgeConnection, JsonForgeWriter } from "./http.js";

/** Gitea has no documented limit; keep descriptions as short as GitLab's column. */
export const GITEA_DESCRIPTION_LIMIT = 255;

export interface GiteaStatusOptions extends ForgeConnection {
  owner: string;
  repo: string;
  /** The instance (`https://gitea.example.com`) or its API base (`.../api/v1`). There is no default. */
  url: string;
}

/** Writes commit statuses to one Gitea or Forgejo repository. Gitea's states match ours one to one. */
export class GiteaStatusWriter extends JsonForgeWriter {
  readonly name: string;
  readonly descriptionLimit = GITEA_DESCRIPTION_LIMIT;
  readonly #path: string;

  constructor(options: GiteaStatusOptions) {
    super(options.url, "/api/v1", options);
    this.name = `gitea:${new URL(this.api).host}/${options.owner}/${options.repo}`;
    this.#path = `/repos/${encodeURIComponent(options.owner)}/${encodeURIComponent(options.repo)}/statuses`;
  }

  async write(status: CommitStatus): Promise<void> {
    await this.post(
      `${this.#path}/${encodeURIComponent(status.sha)}`,
      { authorization: `token ${this.token}` },
      {
        state: status.state,
        context: status.context,
        description: this.description(status),
        ...(status.targetUrl ? { target_url: status.targetUrl } : {}),
      },
    );
  }
}
