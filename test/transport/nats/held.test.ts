/**
 * The messages a hub holds while recording them are marked in progress once half their ack
 * deadline has passed, oldest first, and only those: a hub that keeps up sends nothing.
 */
import { describe, expect, it } from "vitest";
import { HeldMessages } from "../../../src/transport/nats/held.js";

function message() {
  const marks: number[] = [];
  return { marks, msg: { working: () => marks.push(marks.length + 1) } };
}

describe("nats held messages - kept from redelivery while the hub records them", () => {
  it("nats held messages - only messages held for half the deadline are marked, and again half a deadline later", () => {
    let now = 0;
    const held = new HeldMessages(5_000, () => now);
    const old = message();
    const young = message();
    held.hold(old.msg);
    now = 2_000;
    held.hold(young.msg);
    now = 2_499;
    held.renew();
    expect([old.marks.length, young.marks.length]).toEqual([0, 0]);
    now = 2_500;
    held.renew();
    expect([old.marks.length, young.marks.length]).toEqual([1, 0]);
    now = 4_500;
    held.renew();
    expect([old.marks.length, young.marks.length]).toEqual([1, 1]);
    now = 5_000;
    held.renew();
    expect([old.marks.length, young.marks.length]).toEqual([2, 1]);
    held.release(old.msg);
    now = 20_000;
    held.renew();
    expect([old.marks.length, young.marks.length]).toEqual([2, 2]);
    held.clear();
    expect(held.size).toBe(0);
  });
});
