/**
 * Summarizes a V8 CPU profile (node --cpu-prof): self time by function and by module (a package
 * under node_modules, a file under src/, or a node: built-in), the top entries first.
 *
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:cost     (any bench that spawns the service)
 *   npx tsx bench/profile.ts /tmp/prof/<file>.cpuprofile [top=25]
 *   npx tsx bench/profile.ts --inclusive /tmp/prof/<file>.cpuprofile [top=40]
 *
 * PROFILE_SKIP_MS=N leaves out the samples of the first N ms of the profile (start-up and
 * warm-up), so only the measured part of a run is summarized.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  byFunction: Array<{ name: string; ms: number; pct: number }>;
  byModule: Array<{ name: string; ms: number; pct: number }>;
}

function moduleOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg?.[1]) return pkg[1];
  const src = /\/(src\/.+|bench\/.+|test\/.+)$/.exec(url);
  if (src?.[1]) return src[1];
  if (url.startsWith('node:')) return url;
  return url;
}

/** The profile, without the samples of its first PROFILE_SKIP_MS milliseconds (they count as idle). */
function loadProfile(file: string): CpuProfile {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const skipUs = Number(process.env.PROFILE_SKIP_MS ?? 0) * 1000;
  if (skipUs <= 0) return profile;
  const idle = profile.nodes.find((n) => n.callFrame.functionName === '(idle)')?.id ?? -1;
  let at = 0;
  const samples = profile.samples.map((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    return at < skipUs ? idle : id;
  });
  return { ...profile, samples };
}

export function summarizeProfile(file: string, top = 25): ProfileSummary {
  const profile = loadProfile(file);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const fn = new Map<string, number>();
  const mod = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    const m = moduleOf(url, functionName);
    const key = `${functionName || '(anonymous)'} ${m}:${lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    mod.set(m, (mod.get(m) ?? 0) + us);
  }
  const rank = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({
        name,
        ms: Math.round(us / 1000),
        pct: Number(((100 * us) / Math.max(1, total)).toFixed(1)),
      }));
  return {
    totalMs: Math.round(total / 1000),
    idleMs: Math.round(idle / 1000),
    byFunction: rank(fn),
    byModule: rank(mod),
  };
}

/**
 * Inclusive time: each sample counts once for every distinct function on its stack (a function
 * "and what it calls"), so a step's whole cost shows, wherever its callees live.
 */
export function inclusiveProfile(file: string, top = 25): Array<{ name: string; ms: number; pct: number }> {
  const profile = loadProfile(file);
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    if (byId.get(id)?.callFrame.functionName === '(idle)') return;
    busy += us;
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (!frame) break;
      seen.add(
        `${frame.functionName || '(anonymous)'} ${moduleOf(frame.url, frame.functionName)}:${frame.lineNumber + 1}`,
      );
    }
    for (const key of seen) totals.set(key, (totals.get(key) ?? 0) + us);
  });
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, us]) => ({
      name,
      ms: Math.round(us / 1000),
      pct: Number(((100 * us) / Math.max(1, busy)).toFixed(1)),
    }));
}

if (process.argv[1]?.endsWith('profile.ts') && process.argv[2] === '--inclusive' && process.argv[3]) {
  for (const row of inclusiveProfile(process.argv[3], Number(process.argv[4] ?? 40)))
    process.stdout.write(`${String(row.pct).padStart(5)}%  ${row.ms} ms  ${row.name}\n`);
} else if (process.argv[1]?.endsWith('profile.ts') && process.argv[2]) {
  const summary = summarizeProfile(process.argv[2], Number(process.argv[3] ?? 25));
  process.stdout.write(`busy ${summary.totalMs} ms, idle ${summary.idleMs} ms\n\nby module (self time)\n`);
  for (const row of summary.byModule)
    process.stdout.write(`${String(row.pct).padStart(5)}%  ${row.ms} ms  ${row.name}\n`);
  process.stdout.write('\nby function (self time)\n');
  for (const row of summary.byFunction)
    process.stdout.write(`${String(row.pct).padStart(5)}%  ${row.ms} ms  ${row.name}\n`);
}
