import { describe, expect, it } from "vitest";
import {
  convergenceStatus,
  FLEET_CONTEXT,
  invalidRevisionStatus,
  redactSecrets,
  revisionStatuses,
  revisionUrl,
  supersededStatus,
  truncateDescription,
} from "../../src/hub/status.js";
import { NEXT_SHA, SHA } from "./fixtures.js";

describe("status descriptions", () => {
  it.each([
    ["short enough", 20, "short enough"],
    ["exactly ten", 11, "exactly ten"],
    ["one two three four five", 12, "one two…"],
    ["one two three, four five", 15, "one two three…"],
    ["averyveryverylongsingleword", 10, "averyvery…"],
    // Cutting at the last space would lose most of the room: cut inside the word instead.
    ["a bcdefghijklmnopqrstuvwxyz", 12, "a bcdefghij…"],
    ["naïve café résumé déjà vu", 13, "naïve café…"],
    ["emoji😀😀😀😀😀😀 end", 9, "emoji😀😀😀…"],
  ])("descriptions - %j cut to %i is %j", (text, limit, expected) => {
    const cut = truncateDescription(text, limit);
    expect(cut).toBe(expected);
    expect(Array.from(cut).length).toBeLessThanOrEqual(limit);
  });

  it.each([
    ["clone https://deploy:hunter2@git.example/fleet failed", "clone https://***@git.example/fleet failed"],
    ["token=abc123def456 rejected", "token=*** rejected"],
    ["DB_PASSWORD: 'p4ss word'", "DB_PASSWORD: ***"],
    ['api_key="k-1", retrying', "api_key=***, retrying"],
    ["Authorization: Bearer abcdefghijklmnop", "Authorization: ***"],
    ["sent Bearer abcdefghijklmnop to the registry", "sent Bearer *** to the registry"],
    ["used ghp_abcdefghijklmnopqrstuvwxyz0123456789", "used ***"],
    ["used glpat-abcdefghijklmnopqrst", "used ***"],
    ["key AKIAABCDEFGHIJKLMNOP leaked", "key *** leaked"],
    ["-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY----- in file", "*** in file"],
    ["probe GET /health answered 503", "probe GET /health answered 503"],
  ])("descriptions - secrets are redacted: %j", (text, expected) => {
    expect(redactSecrets(text)).toBe(expected);
  });

  it("descriptions - a known secret value is redacted wherever it appears", () => {
    expect(redactSecrets("connecting with s3cr3t-value failed (s3cr3t-value)", ["s3cr3t-value"])).toBe(
      "connecting with *** failed (***)",
    );
  });

  it.each([
    {
      converged: [false, false, false],
      generations: [7, 7, 7],
      state: "pending",
      description: "0/3 nodes at generation 7",
    },
    {
      converged: [true, false, true],
      generations: [7, 7, 7],
      state: "pending",
      description: "2/3 nodes at generation 7",
    },
    {
      converged: [true, true],
      generations: [7, 3],
      state: "success",
      description: "2/2 instances converged, probes passing",
    },
    { converged: [], generations: [], state: "success", description: "nothing to converge" },
  ])(
    "descriptions - convergence of $converged at $generations is $state: $description",
    ({ converged, generations, state, description }) => {
      const instances = converged.map((done, i) => ({
        assignment: "web",
        node: `edge-${i}`,
        generation: generations[i]!,
        converged: done,
      }));
      expect(convergenceStatus({ sha: SHA, context: "steward/web", instances })).toEqual({
        sha: SHA,
        context: "steward/web",
        state,
        description,
      });
    },
  );

  it("descriptions - a failure leads with condition, node and attempt, and the message is cleaned", () => {
    const status = convergenceStatus({
      sha: SHA,
      context: "steward/web",
      instances: [{ assignment: "web", node: "edge-1", generation: 2, converged: false }],
      failures: [
        {
          assignment: "web",
          node: "edge-1",
          condition: "ProbeFailing",
          attemptId: "01J9ZQ4T7V8W9X0Y1Z2A3B4C5D",
          message: "GET https://admin:pw@edge-1/health\n  answered 500",
        },
      ],
      publicUrl: "https://hub.example/",
    });
    expect(status).toEqual({
      sha: SHA,
      context: "steward/web",
      state: "failure",
      description:
        "ProbeFailing on edge-1, attempt 01J9ZQ4T7V8W9X0Y1Z2A3B4C5D: GET https://***@edge-1/health answered 500",
      targetUrl: `https://hub.example/revisions/${SHA}`,
    });
  });

  it("descriptions - an invalid revision names file:line of the first error, or the file when there is no line", () => {
    expect(
      invalidRevisionStatus({
        sha: SHA,
        diagnostics: [
          {
            severity: "warning",
            code: "x/warn",
            file: "a.yaml",
            line: 1,
            column: 1,
            message: "just a warning",
          },
          {
            severity: "error",
            code: "yaml/syntax",
            file: "nodes/edge.yaml",
            line: 0,
            column: 0,
            message: "not YAML",
          },
        ],
      }),
    ).toEqual({
      sha: SHA,
      context: FLEET_CONTEXT,
      state: "error",
      description: "invalid: nodes/edge.yaml: not YAML",
    });
  });

  it("descriptions - a superseded commit keeps a final state and ends a pending one in error", () => {
    const base = { sha: SHA, context: FLEET_CONTEXT, supersededBy: NEXT_SHA };
    expect(
      supersededStatus({ ...base, previous: { ...base, state: "success", description: "3/3 nodes" } }),
    ).toMatchObject({
      state: "success",
      description: "superseded by 89e6c98d9288; was 3/3 nodes",
    });
    expect(
      supersededStatus({ ...base, previous: { ...base, state: "pending", description: "1/3" } }),
    ).toMatchObject({
      state: "error",
      description: "superseded by 89e6c98d9288 before it converged",
    });
    // Skipped in the same fetch: never rolled out.
    expect(
      revisionStatuses(
        { sha: SHA, outcome: "superseded", supersededBy: NEXT_SHA, changedAssignments: ["web"] },
        { instances: [] },
      ),
    ).toEqual([
      {
        sha: SHA,
        context: FLEET_CONTEXT,
        state: "error",
        description: "superseded by 89e6c98d9288 before it rolled out",
      },
      {
        sha: SHA,
        context: "steward/web",
        state: "error",
        description: "superseded by 89e6c98d9288 before it rolled out",
      },
    ]);
  });

  it("descriptions - only the assignments the revision changed get a context, and their instances make the fleet", () => {
    const statuses = revisionStatuses(
      { sha: SHA, outcome: "applied", changedAssignments: ["web"] },
      {
        instances: [
          { assignment: "web", node: "edge-1", generation: 4, converged: true },
          { assignment: "db", node: "edge-1", generation: 9, converged: false },
        ],
      },
    );
    expect(statuses.map((s) => [s.context, s.state, s.description])).toEqual([
      [FLEET_CONTEXT, "success", "1/1 node at generation 4, probes passing"],
      ["steward/web", "success", "1/1 node at generation 4, probes passing"],
    ]);
    expect(revisionUrl(undefined, SHA)).toBeUndefined();
  });
});
