/**
 * An upstream whose finished answers for some identifiers are recorded portal answers
 * (test/fixtures/mapping/*.json) instead of the sandbox's: the sandbox still runs the task over
 * real HTTP (create-task, the in-flight states, the timing); once it reports PROCESS_COMPLETE, the
 * answer for a listed identifier is the fixture's, with the task's own ids and request. For plans
 * shaped like real ones (issue 35) that the sandbox does not build.
 */
import { readFileSync } from 'node:fs';
import type { Envelope } from '../../src/upstream/contract.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import type { UpstreamPort } from '../../src/upstream/port.js';

/** A recorded answer of test/fixtures/mapping/, checked against the envelope schema. */
export function mappingFixture(name: string): Envelope {
  const url = new URL(`../fixtures/mapping/${name}.json`, import.meta.url);
  return envelopeSchema.parse(JSON.parse(readFileSync(url, 'utf8')));
}

/** Wraps an upstream port: a finished task of a listed identifier answers with its fixture. */
export function fixtureUpstream(
  byIdentifier: Readonly<Record<string, Envelope>>,
): (inner: UpstreamPort) => UpstreamPort {
  return (inner) => ({
    createTask: (creds, body) => inner.createTask(creds, body),
    health: () => inner.health(),
    async getResult(creds, taskId) {
      const answer = await inner.getResult(creds, taskId);
      if (!answer.ok || answer.value.status !== 'PROCESS_COMPLETE') return answer;
      const real = answer.value;
      const fixture = byIdentifier[real.request_dump?.emirates_id ?? ''];
      if (!fixture?.eligibility_result) return answer;
      const payer = real.request_dump?.tpa_name ?? fixture.eligibility_result.tpa_name;
      const value: Envelope = {
        ...fixture,
        task_id: real.task_id,
        created_at: real.created_at,
        updated_at: real.updated_at,
        request_dump: real.request_dump,
        eligibility_result: {
          ...fixture.eligibility_result,
          id: `${real.task_id}:${payer}`,
          task_id: real.task_id,
          tpa_name: payer,
          created_at: real.updated_at,
          updated_at: real.updated_at,
        },
      };
      return { ok: true, value };
    },
  });
}
