/**
 * The upstream the service talks to: the configured one, or the built-in sandbox simulator when
 * UPSTREAM_BASE_URL is not set (docs/upstream.md); wrapped by the metrics and, under test, by an
 * override.
 */
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { startSandbox } from '../sandbox/index.js';
import { UpstreamClient } from '../upstream/client.js';
import type { UpstreamPort } from '../upstream/port.js';

export interface ConnectedUpstream {
  /** The instrumented port every caller uses. */
  upstream: UpstreamPort;
  url: string;
  /** True when the built-in simulator answers. */
  sandbox: boolean;
  close(): Promise<void>;
}

export async function connectUpstream(
  config: Config,
  logger: Logger,
  metrics: Metrics,
  override?: (client: UpstreamClient) => UpstreamPort,
): Promise<ConnectedUpstream> {
  let sandbox: Awaited<ReturnType<typeof startSandbox>> | null = null;
  let url: string;
  if (config.upstreamBaseUrl) {
    url = config.upstreamBaseUrl;
  } else {
    sandbox = await startSandbox({
      port: 0,
      host: '127.0.0.1',
      timeScale: config.sandboxTimeScale,
      apiKeys: config.tenants.map((t) => t.upstream.apiKey),
    });
    url = sandbox.url;
    logger.warn(
      'SANDBOX MODE: UPSTREAM_BASE_URL is not set; checks run against the built-in simulator, not real payers',
      { upstreamUrl: url },
    );
  }
  // A step (one upstream call) must end well inside the lease, or another replica could take the
  // check over while create-task is still out and wrongly judge it ambiguous.
  const client = new UpstreamClient({
    baseUrl: url,
    requestTimeoutMs: Math.min(15_000, Math.floor(config.leaseMs / 2)),
  });
  return {
    upstream: metrics.instrument(override ? override(client) : client),
    url,
    sandbox: sandbox !== null,
    async close() {
      await client.close();
      await sandbox?.close();
    },
  };
}
