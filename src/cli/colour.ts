/**
 * Colour where it helps — states and diffs — and only where it can be seen: never when `NO_COLOR`
 * is set (to anything but the empty string, as no-color.org says), when `TERM=dumb`, or when
 * stdout is not a terminal. Every coloured state also carries its symbol or word, so nothing is
 * said by colour alone.
 */
import { DISPLAY_STATES, type DisplayState, type DisplayStateInfo } from "../hub/states.js";
import type { CliIo } from "./io.js";

const CODES = {
  green: "32",
  yellow: "33",
  red: "31",
  cyan: "36",
  dim: "2",
  bold: "1",
} as const;

const TONES: Record<DisplayStateInfo["tone"], keyof typeof CODES> = {
  ok: "green",
  progress: "cyan",
  attention: "yellow",
  failure: "red",
  muted: "dim",
};

/** True when stdout is a terminal that shows colour and nobody asked for none. */
export function colourEnabled(io: Pick<CliIo, "env" | "isTty">): boolean {
  if (io.env.NO_COLOR !== undefined && io.env.NO_COLOR !== "") return false;
  if (io.env.TERM === "dumb") return false;
  return io.isTty;
}

/** True when output may be redrawn in place (cursor movement): a terminal that is not dumb. */
export function redrawEnabled(io: Pick<CliIo, "env" | "isTty">): boolean {
  return io.isTty && io.env.TERM !== "dumb";
}

/** Colours for one output; each is the identity when colour is off. */
export interface Palette {
  readonly enabled: boolean;
  paint(colour: keyof typeof CODES, text: string): string;
  /** `text` in the colour of a display state. */
  state(state: DisplayState, text?: string): string;
  /** Colours of the answers of `steward status`. */
  answer(answer: "right" | "converging" | "not-right", text: string): string;
}

export function palette(io: Pick<CliIo, "env" | "isTty">): Palette {
  const enabled = colourEnabled(io);
  const paint = (colour: keyof typeof CODES, text: string) =>
    enabled && text !== "" ? `\x1b[${CODES[colour]}m${text}\x1b[0m` : text;
  return {
    enabled,
    paint,
    state: (state, text = DISPLAY_STATES[state].label) => paint(TONES[DISPLAY_STATES[state].tone], text),
    answer: (answer, text) =>
      paint(answer === "right" ? "green" : answer === "converging" ? "yellow" : "red", text),
  };
}

/** A plan or diff with its added lines green, removed lines red and changed lines yellow. */
export function colourDiff(text: string, colours: Palette): string {
  if (!colours.enabled) return text;
  return text
    .split("\n")
    .map((line) => {
      const mark = line.trimStart()[0];
      if (mark === "+") return colours.paint("green", line);
      if (mark === "-") return colours.paint("red", line);
      if (mark === "~") return colours.paint("yellow", line);
      return line;
    })
    .join("\n");
}
