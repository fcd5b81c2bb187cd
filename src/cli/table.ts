/** Tables for people (cli-table3), borderless like `kubectl get`. */
import Table from "cli-table3";

const NO_BORDER = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "  ",
};

/** Renders rows under a header, one line per row, columns padded; ends with a newline. */
export function renderTable(head: string[], rows: (string | number | undefined)[][]): string {
  const table = new Table({
    head,
    chars: NO_BORDER,
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
  });
  for (const row of rows) table.push(row.map((cell) => (cell === undefined ? "" : String(cell))));
  return `${table
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")}\n`;
}

/** A time as `5s ago`, `3m ago`, `2h ago` relative to `now`. */
export function ago(iso: string | undefined, now: Date): string {
  if (!iso) return "never";
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  if (seconds < 120) return `${seconds}s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h ago`;
  return `${Math.round(seconds / 86_400)}d ago`;
}

/** A future time as `in 5s`, `in 3m`, `in 2h` from `now` (`now` when it is due). */
export function until(iso: string | undefined, now: Date): string {
  if (!iso) return "not scheduled";
  const seconds = Math.round((Date.parse(iso) - now.getTime()) / 1000);
  if (seconds <= 0) return "due now";
  if (seconds < 120) return `in ${seconds}s`;
  if (seconds < 7200) return `in ${Math.round(seconds / 60)}m`;
  return `in ${Math.round(seconds / 3600)}h`;
}
