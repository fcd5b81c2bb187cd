/**
 * `steward up --open`: the fleet page in the desktop's browser, with the platform's opener
 * (`xdg-open` on Linux and the BSDs, `open` on macOS, `start` on Windows). Opening is a courtesy:
 * without an opener, or when it fails, the command says so and goes on — the URL is printed anyway.
 */
import { spawn } from "node:child_process";

/** The command that opens `url` on `platform`. */
export function openerFor(platform: NodeJS.Platform, url: string): [string, string[]] {
  if (platform === "darwin") return ["open", [url]];
  if (platform === "win32") return ["cmd", ["/c", "start", "", url]];
  return ["xdg-open", [url]];
}

/**
 * Starts the opener for `url` (not waited for: a browser may keep it running) and resolves with
 * why it could not be started, or undefined once it was.
 */
export function openInBrowser(
  url: string,
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform = process.platform,
): Promise<string | undefined> {
  const [command, args] = openerFor(platform, url);
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: "ignore", detached: true });
    child.once("error", (error: NodeJS.ErrnoException) =>
      resolve(
        error.code === "ENOENT"
          ? `${command} is not installed here (on Debian: apt-get install -y xdg-utils): open ${url} in a browser`
          : `${command} failed (${error.message}): open ${url} in a browser`,
      ),
    );
    child.once("spawn", () => {
      child.unref();
      resolve(undefined);
    });
  });
}
