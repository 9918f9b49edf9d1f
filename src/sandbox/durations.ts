/**
 * A realistic spread of task durations (opt-in, `durationSeed`): each payer's portal has its own
 * typical durations, and each task varies around them. Without a seed the sandbox keeps its fixed
 * timelines (scenarios.ts), which the tests rely on.
 *
 * Deterministic: a payer's profile comes from (seed, payer code), a task's durations from
 * (seed, payer code, the task's key), so two sandboxes with one seed give the same check the same
 * durations whatever order tasks arrive in (bench/polling.ts compares two strategies that way).
 * Durations are at timeScale 1, multiplied by timeScale as every other sandbox duration.
 */
import { createHash } from 'node:crypto';

/** A payer's typical durations, ms at timeScale 1, and how much its tasks vary (log-normal sigma). */
export interface PayerProfile {
  queueMs: number;
  navigateMs: number;
  extractMs: number;
  sigma: number;
}

/** Uniform numbers in (0, 1) from a text, as many as asked (SHA-256 of the text and a counter). */
function uniforms(text: string, count: number): number[] {
  const out: number[] = [];
  for (let i = 0; out.length < count; i += 1) {
    const digest = createHash('sha256').update(`${text}\u0000${i}`).digest();
    for (let at = 0; at + 6 <= digest.length && out.length < count; at += 6)
      out.push((digest.readUIntBE(at, 6) + 0.5) / 2 ** 48);
  }
  return out;
}

/** A standard normal number from two uniforms (Box-Muller). */
function normal(u1: number, u2: number): number {
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

const between = (u: number, low: number, high: number): number => low + u * (high - low);

/**
 * The profile of a payer: queue 0.5-2.5 s, portal navigation 20-60 s, extraction 3-9 s (medians),
 * each task spread around them by a log-normal sigma of 0.15-0.35.
 */
export function payerProfile(seed: number, payerCode: string): PayerProfile {
  const [q, n, e, s] = uniforms(`profile\u0000${seed}\u0000${payerCode}`, 4) as [
    number,
    number,
    number,
    number,
  ];
  return {
    queueMs: Math.round(between(q, 500, 2500)),
    navigateMs: Math.round(between(n, 20_000, 60_000)),
    extractMs: Math.round(between(e, 3000, 9000)),
    sigma: Math.round(between(s, 0.15, 0.35) * 100) / 100,
  };
}

/** One task's phase durations (ms at timeScale 1), by upstream status. */
export function taskPhaseDurations(seed: number, payerCode: string, taskKey: string): Record<string, number> {
  const profile = payerProfile(seed, payerCode);
  const [a, b, c, d, e, f] = uniforms(`task\u0000${seed}\u0000${payerCode}\u0000${taskKey}`, 6) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const spread = (median: number, z: number): number =>
    Math.max(50, Math.round(median * Math.exp(profile.sigma * z)));
  return {
    IN_QUEUE: spread(profile.queueMs, normal(a, b)),
    NAVIGATING_WEBSITE: spread(profile.navigateMs, normal(c, d)),
    EXTRACTING_DATA: spread(profile.extractMs, normal(e, f)),
  };
}
