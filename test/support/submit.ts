/**
 * `POST /fhir/CoverageEligibilityRequest/$submit` of a request built by eligibilityRequest, as the
 * component tests send it: the caller's auth and headers, FHIR JSON. Each test asserts on the
 * answer itself.
 */
import request from 'supertest';
import { eligibilityRequest } from './requests.js';
import type { RequestOptions } from './requests.js';

export const SUBMIT_PATH = '/fhir/CoverageEligibilityRequest/$submit';

export function postSubmit(
  url: string,
  auth: Record<string, string>,
  options: RequestOptions,
  headers: Record<string, string> = {},
): request.Test {
  return request(url)
    .post(SUBMIT_PATH)
    .set(auth)
    .set(headers)
    .set('Content-Type', 'application/fhir+json')
    .send(eligibilityRequest(options));
}

/**
 * Submits a check and waits (up to 10 s) for its final answer, which must be 200; returns the
 * CER's path (`/fhir/CoverageEligibilityResponse/{id}`).
 */
export async function submitFinal(
  url: string,
  auth: Record<string, string>,
  options: RequestOptions,
): Promise<string> {
  const created = await postSubmit(url, auth, options, { Prefer: 'wait=10' });
  if (created.status !== 200) throw new Error(`$submit answered ${created.status}, not 200`);
  return new URL(String(created.headers.location)).pathname;
}
