/** The hub's own key/value facts on SQL (table `hub_meta`). */
import type { Meta } from "../store.js";
import type { Sql } from "./sql.js";

export class MetaSql implements Meta {
  constructor(private readonly sql: Sql) {}

  async get(key: string): Promise<string | undefined> {
    return (await this.sql.get("SELECT value FROM hub_meta WHERE key = ?", [key]))?.value as
      | string
      | undefined;
  }

  async set(key: string, value: string): Promise<void> {
    await this.sql.run(
      "INSERT INTO hub_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [key, value],
    );
  }
}
