/**
 * Slots: a counting semaphore. The lifecycle takes one for each create-task call, so a replica
 * never has more create-task calls out than the upstream client has connections (a crash leaves
 * few ambiguous checks behind). Made by the composition root (src/server.ts).
 */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(size: number) {
    this.free = size;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}
