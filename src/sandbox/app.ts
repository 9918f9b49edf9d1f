/**
 * The sandbox's HTTP surface (express 5), under /v2/api-integration-v3 as docs/upstream.md
 * describes it, plus /sandbox-files/{key} serving the signed links. Logs nothing: it would only
 * ever see patient data.
 */
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import type { BuildClock } from './builders.js';
import { buildEnvelope, buildTaskStatus } from './builders.js';
import type { LinkSigner } from './links.js';
import { fileBody } from './links.js';
import { upstreamTimestamp } from './progress.js';
import type { TaskBook } from './tasks.js';
import { taskRequestSchema } from './tasks.js';

export const BASE_PATH = '/v2/api-integration-v3';

/** The bulk endpoints: they exist and answer 503 on every call (docs/upstream.md, "Endpoints the adapter calls"). */
export const BULK_PATHS = ['/create-tasks-bulk', '/eligibility-results-bulk'] as const;

export interface SandboxDeps {
  book: TaskBook;
  links: LinkSigner;
  /** Pads every screenshot to this many bytes (0: the 1x1 PNG). */
  screenshotBytes?: () => number;
  apiKeys: ReadonlySet<string>;
  timeScale: number;
  linkTtlMs: () => number;
  /** File keys ending so have every link refused (403 `Link expired`), however fresh (SandboxControl.refuseLinks). */
  refusedKeys?: () => readonly string[];
  now: () => number;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function origin(req: Request): string {
  return `${req.protocol}://${req.get('host') ?? 'localhost'}`;
}

function clockFor(req: Request, deps: SandboxDeps): BuildClock {
  const base = origin(req);
  const ttl = deps.linkTtlMs();
  return {
    nowMs: deps.now(),
    timeScale: deps.timeScale,
    signer: (issuedAtMs) => deps.links.signer(base, issuedAtMs, ttl),
  };
}

/** x-api-key must be accepted and X-Clinic-ID, X-Client-ID present (Authentication). */
function requireHeaders(deps: SandboxDeps) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const key = req.get('x-api-key');
    if (!key || !deps.apiKeys.has(key) || !req.get('x-clinic-id') || !req.get('x-client-id')) {
      res.status(401).json({ detail: 'Missing or invalid x-api-key, X-Clinic-ID or X-Client-ID header' });
      return;
    }
    next();
  };
}

function clinicOf(req: Request): string {
  return req.get('x-clinic-id') ?? '';
}

function taskRoutes(deps: SandboxDeps): express.Router {
  const router = express.Router();
  router.post('/create-task', async (req, res) => {
    deps.book.count('createTask');
    const parsed = taskRequestSchema.safeParse(req.body);
    if (!parsed.success) {
      const detail = parsed.error.issues.map((i) => ({
        loc: ['body', ...i.path.map(String)],
        msg: i.message,
      }));
      res.status(422).json({ detail });
      return;
    }
    const task = deps.book.create(clinicOf(req), parsed.data, deps.now());
    const answerDelay = deps.book.faults.createTaskLatencyMs ?? 0;
    if (answerDelay > 0) await sleep(answerDelay);
    res.status(200).json({ task_id: task.taskId, status: 'IN_QUEUE' });
  });

  router.get('/eligibility-result/:taskId', (req, res) => {
    deps.book.count('polls');
    const injected = deps.book.injectedPollError();
    if (injected !== null) {
      res.status(injected).json({ detail: 'Injected fault (sandbox)' });
      return;
    }
    const task = deps.book.get(clinicOf(req), req.params.taskId);
    if (!task) {
      res.status(404).json({ detail: 'Task not found' });
      return;
    }
    res.json(buildEnvelope(task, clockFor(req, deps)));
  });

  router.get('/task-status/:taskId', (req, res) => {
    deps.book.count('taskStatus');
    const task = deps.book.get(clinicOf(req), req.params.taskId);
    if (!task) {
      res.status(404).json({ detail: 'Task not found' });
      return;
    }
    res.json(buildTaskStatus(task, clockFor(req, deps)));
  });
  return router;
}

function apiRouter(deps: SandboxDeps): express.Router {
  const router = express.Router();
  router.use(async (_req, _res, next) => {
    const latency = deps.book.faults.latencyMs;
    if (latency > 0) await sleep(latency);
    next();
  });
  router.get('/health', (_req, res) => {
    res.json({ status: 'ok', timestamp: upstreamTimestamp(deps.now()) });
  });
  for (const path of BULK_PATHS) {
    router.all(path, (_req, res) => {
      res.status(503).json({ detail: 'Bulk endpoints are not available' });
    });
  }
  router.use(requireHeaders(deps));
  router.use(express.json({ limit: '100kb' }));
  router.use(taskRoutes(deps));
  router.use((_req, res) => {
    res.status(404).json({ detail: 'Not found' });
  });
  return router;
}

/** The whole sandbox app. */
export function createSandboxApp(deps: SandboxDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/sandbox-files/:key', (req, res) => {
    const refused = deps.refusedKeys?.().some((end) => req.params.key.endsWith(end)) ?? false;
    const verdict = refused
      ? 'expired'
      : deps.links.verify(req.params.key, req.query.sig, req.query.expires, deps.now());
    if (verdict !== 'ok') {
      res.status(403).json({ detail: verdict === 'expired' ? 'Link expired' : 'Invalid signature' });
      return;
    }
    const file = fileBody(req.params.key, deps.screenshotBytes?.() ?? 0);
    res.type(file.contentType).send(file.body);
  });
  app.use(BASE_PATH, apiRouter(deps));
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ detail: 'Not found' });
  });
  // Malformed JSON bodies and anything unexpected: JSON answers, never an HTML stack trace.
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const parseError =
      typeof err === 'object' && err !== null && 'type' in err && err.type === 'entity.parse.failed';
    res
      .status(parseError ? 422 : 500)
      .json({ detail: parseError ? 'Request body is not valid JSON' : 'Internal sandbox error' });
  });
  return app;
}
