/** Polls `probe` every 100 ms until it returns a value; throws after `timeoutMs` naming `what`. */
export async function until<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
  what = 'condition',
): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
