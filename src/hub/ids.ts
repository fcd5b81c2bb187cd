import { randomFillSync } from "node:crypto";
import type { Clock } from "./clock.js";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * Makes ULIDs from the hub's clock: 48 bits of milliseconds and 80 random bits, in Crockford base32,
 * sortable by creation time and strictly increasing within a process (within one millisecond the
 * random part counts up, as the ULID spec's monotonic mode says). Random bytes come from a pooled
 * buffer: an attempt costs no system call for its id.
 */
export function idFactory(clock: Clock): () => string {
  const pool = Buffer.alloc(4096);
  let offset = pool.length;
  let lastTime = -1;
  const random = new Uint8Array(10);
  return () => {
    const time = Math.max(clock.now().getTime(), lastTime);
    if (time === lastTime) {
      // Same millisecond: increment the 80-bit random part.
      for (let i = random.length - 1; i >= 0; i--) {
        random[i] = (random[i]! + 1) & 0xff;
        if (random[i] !== 0) break;
      }
    } else {
      if (offset + random.length > pool.length) {
        randomFillSync(pool);
        offset = 0;
      }
      random.set(pool.subarray(offset, offset + random.length));
      offset += random.length;
      lastTime = time;
    }
    let text = "";
    let t = time;
    for (let i = 0; i < 10; i++) {
      text = CROCKFORD[t % 32]! + text;
      t = Math.floor(t / 32);
    }
    // 80 bits = 16 base32 characters, 5 bits each, most significant first.
    let bits = 0;
    let value = 0;
    for (const byte of random) {
      value = (value << 8) | byte;
      bits += 8;
      while (bits >= 5) {
        text += CROCKFORD[(value >>> (bits - 5)) & 31]!;
        bits -= 5;
      }
      value &= (1 << bits) - 1;
    }
    return text;
  };
}
