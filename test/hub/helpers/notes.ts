/**
 * Commit statuses into git notes of a bare repository for harness tests: `hubOptions` gives a
 * harness its status sink; `publisher()` is the publisher once the harness made it.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import type { Store } from "../../../src/hub/store/store.js";
import { GitNotesStatusWriter, readStatusNote } from "../../../src/status/gitnotes.js";
import { StatusPublisher } from "../../../src/status/publisher.js";

export function notesPublisher(statusIntervalMs = 1_000) {
  const gitdir = join(fs.mkdtempSync(join(process.env.TMPDIR ?? "/tmp", "steward-notes-")), "fleet.git");
  execFileSync("git", ["init", "-q", "--bare", gitdir]);
  let publisher: StatusPublisher | undefined;
  return {
    gitdir,
    publisher: () => publisher!,
    hubOptions: (store: Store) => {
      publisher ??= new StatusPublisher({
        store,
        writers: [new GitNotesStatusWriter({ fs, gitdir })],
        debounceMs: 0,
      });
      return { statusSink: publisher, statusIntervalMs };
    },
    /** The statuses noted on `sha`. */
    read: (sha: string) => readStatusNote({ fs, gitdir, sha }),
  };
}
