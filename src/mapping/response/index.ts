/**
 * Response mapping: upstream eligibility envelope -> FHIR R4 CoverageEligibilityResponse, the
 * outcome table, stable document ids and the conformance resources the CERs use.
 * Pure functions, no I/O beyond loading the mapping tables once. See docs/response-mapping.md.
 */
export { adapterErrorCer, mapEnvelope, queuedCer, searchAllCutOffCer, stillCheckingCer } from './cer.js';
export { OUTCOME_KEYS, guardOf, outcomeKey, outcomeRuleFor, submitOutcome } from './outcome-rules.js';
export type { OutcomeKey } from './outcome-rules.js';
export type { OutcomeRule } from './outcome-rules.js';
export { binaryId, parseBinaryId, resolveBinary } from './binary.js';
export type { BinaryKind, BinaryRef } from './binary.js';
export { conformanceResources } from '../conformance/resources.js';
export { OUTCOME_SYSTEM, extensionUrl } from './codes.js';
