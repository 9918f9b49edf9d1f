/**
 * The Subscriptions R5 Backport IG's definitions this service uses (STU 1.1,
 * https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/), copied into the package so that it
 * needs no other dependency than R4 core: the extensions, the profiles of the Subscription, its
 * notification Bundle and status Parameters, the `$status` and `$events` OperationDefinitions the
 * CapabilityStatement names, their terminology, and the cross-version extensions of the topic's
 * Basic. Data, not code: mappings/conformance/backport.json, each resource as the IG defines it
 * (its snapshots are generated like the service's own).
 */
import type { Resource } from 'fhir/r4.js';
import { z } from 'zod';
import { loadMappingTable } from '../mapping-table.js';

const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/';
const CROSS_VERSION = /^http:\/\/hl7\.org\/fhir\/(5\.0|4\.3)\/StructureDefinition\/extension-/;
const R4B_NOTIFICATION_TYPE = /^http:\/\/hl7\.org\/fhir\/(ValueSet\/)?subscription-notification-type$/;

const resourceSchema = z
  .looseObject({
    resourceType: z.enum(['StructureDefinition', 'OperationDefinition', 'CodeSystem', 'ValueSet']),
    id: z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/),
    url: z.string(),
  })
  .refine(
    (r) => r.url.startsWith(BACKPORT) || CROSS_VERSION.test(r.url) || R4B_NOTIFICATION_TYPE.test(r.url),
    'a url of the backport IG, an R5/R4B cross-version extension or R4B subscription-notification-type',
  );
const tableSchema = z.object({ description: z.string(), resources: z.array(resourceSchema).min(1) });

let resources: Resource[] | undefined;

/** The backport IG's resources the service uses, in the file's order, as the file has them. */
export function backportResources(): Resource[] {
  // A loose object keeps every key, in the file's order after resourceType, id and url (which lead
  // in every resource): a snapshot's source digest is of that JSON.
  resources ??= loadMappingTable('conformance/backport.json', tableSchema).resources as unknown as Resource[];
  return resources;
}
