/** How a store's location may be shown and recorded. */

/** A database URL without its password: what may be shown, logged and written to hub.json. */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.password) return url;
    parsed.password = "";
    return parsed.toString().replace(/^(\w+:\/\/[^:@/]+):@/, "$1@");
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1@");
  }
}
