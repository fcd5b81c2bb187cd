/**
 * At most `max` calls at once; the others wait their turn, in the order they came. The hub puts its
 * JetStream requests through one: a rollout of 100,000 instances sends 100,000 publishes, and all
 * of them outstanding at once make each wait longer than its acknowledgement timeout.
 */
export class InFlight {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < this.max) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes to the next in line, or is given back.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
