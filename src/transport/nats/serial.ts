/**
 * Runs tasks one after another per key and concurrently across keys: the hub hears each node's
 * messages in order while one slow node does not hold up the others.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `task` after every earlier task of `key`; resolves or rejects with it. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Resolves once every task queued so far has settled. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all(this.tails.values());
  }
}
