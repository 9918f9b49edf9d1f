/**
 * GET /fhir/metadata: the CapabilityStatement, built by mapping/conformance/capability-statement.ts
 * (the package carries the same statement, so it is built below the operations). Its date is the
 * date of this version of the conformance resources, never the start time: the same source
 * answers the same statement.
 */
import { common } from '../mapping/conformance/resources.js';

export { capabilityStatement, type CapabilityFeatures } from '../mapping/conformance/capability-statement.js';

/** The CapabilityStatement's date. */
export const CAPABILITY_DATE = common.date;
