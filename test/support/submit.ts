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
