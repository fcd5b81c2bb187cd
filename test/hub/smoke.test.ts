import { afterEach, describe, expect, it } from "vitest";
import { type Harness, NODE, startHarness } from "./helpers/harness.js";

const ASSIGNMENT = (content: string) => `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: motd
spec:
  nodes: [n1, n2]
  resources:
    - kind: file
      name: motd
      path: /srv/motd
      content: "${content}"
`;

let h: Harness;
afterEach(async () => h?.close());

describe("hub - smoke", () => {
  it("hub - converges two nodes", async () => {
    h = await startHarness({
      files: {
        "nodes/n1.yaml": NODE("n1"),
        "nodes/n2.yaml": NODE("n2"),
        "assignments/motd.yaml": ASSIGNMENT("one"),
      },
    });
    await h.commit();
    await h.settle();
    console.log(h.intent("motd@n1"), h.store.attemptsOf("motd@n1"));
    expect(h.intent("motd@n1").status).toBe("converged");
    expect(h.read("n1", "srv/motd")).toBe("one");
    h.write({ "assignments/motd.yaml": ASSIGNMENT("two") });
    await h.commit();
    await h.settle();
    expect(h.intent("motd@n2").generation).toBe(2);
    expect(h.intent("motd@n2").status).toBe("converged");
    expect(h.read("n2", "srv/motd")).toBe("two");
  });
});
