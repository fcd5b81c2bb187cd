import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { commentMarker } from "../../src/action/comment.js";
import { annotation, fitMarkdown, writeOutputs } from "../../src/action/workflow.js";
import { removeTempDirs, tempDir } from "../helpers/git.js";
import { parseOutputs } from "./harness.js";

afterAll(removeTempDirs);

describe("action workflow files", () => {
  it("action workflow files - outputs survive newlines and the heredoc delimiter is unguessable", () => {
    const file = join(tempDir(), "output");
    writeOutputs(file, { valid: "true", "plan-json": "line one\nline two\nEOF\n" });
    writeOutputs(file, { "changed-instances": "3" });
    const text = readFileSync(file, "utf8");
    expect(parseOutputs(text)).toEqual({
      valid: "true",
      "plan-json": "line one\nline two\nEOF\n",
      "changed-instances": "3",
    });
    const delimiters = [...text.matchAll(/<<(.+)$/gm)].map((m) => m[1]);
    expect(delimiters[0]).toMatch(/^ghadelimiter_[0-9a-f-]{36}$/);
    expect(delimiters[2]).not.toBe(delimiters[0]);
  });

  it("action workflow files - a Markdown report over the limit is cut at a line, its open diff fence closed at its indent", () => {
    const diff = Array.from({ length: 400 }, (_, i) => `    +line ${i}`).join("\n");
    const markdown = `### plan\n\n- **web@web-1**: new generation\n  - changed \`file config\`\n\n    \`\`\`diff\n${diff}\n    \`\`\`\n\n#### Rollout\n`;
    const note = "**cut**";
    const fitted = fitMarkdown(markdown, 2_000, note);
    expect(Buffer.byteLength(fitted)).toBeLessThanOrEqual(2_000);
    expect(fitted.endsWith("    ```\n\n**cut**\n")).toBe(true);
    expect(fitted).not.toContain("#### Rollout");
    expect(fitted.split("\n").filter((line) => line.trim().startsWith("```"))).toEqual([
      "    ```diff",
      "    ```",
    ]);
    expect(fitMarkdown(markdown, 100_000, note)).toBe(markdown);
  });

  it("action workflow files - annotation messages are escaped so one finding stays one command", () => {
    expect(annotation("warning", "100% sure\nsecond line")).toBe("::warning::100%25 sure%0Asecond line\n");
  });

  it("action workflow files - one comment marker per fleet repository path", () => {
    expect(commentMarker("")).toBe("<!-- steward-plan -->");
    expect(commentMarker("deploy/fleet")).toBe("<!-- steward-plan path=deploy%2Ffleet -->");
  });
});
