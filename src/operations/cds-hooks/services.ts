/**
 * The CDS Services this adapter offers, as its discovery document lists them
 * (https://cds-hooks.hl7.org/2.0/#discovery), and the feedback a CDS Client sends about their
 * cards (https://cds-hooks.hl7.org/2.0/#feedback).
 */
import { z } from 'zod';
import { badRequest } from '../../fhir/outcomes.js';
import { PREFETCH } from './prefetch.js';

export interface CdsService {
  hook: 'appointment-book' | 'patient-view';
  id: string;
  title: string;
  description: string;
  prefetch: Record<string, string>;
}

export const CDS_SERVICES: readonly CdsService[] = [
  {
    hook: 'appointment-book',
    id: 'eligibility-appointment-book',
    title: 'Insurance eligibility at booking',
    description:
      "Checks the patient's insurance eligibility at the payer portal for each booked appointment, in the background, and re-checks it before the visit; the card says what was started, or the answer when one is already there.",
    prefetch: { ...PREFETCH },
  },
  {
    hook: 'patient-view',
    id: 'eligibility-patient-view',
    title: 'Insurance eligibility on the chart',
    description:
      "Shows the patient's latest eligibility answer per payer (and its date); with none and an active Coverage, starts a check.",
    prefetch: { ...PREFETCH },
  },
];

/** The service of an id, or undefined. */
export function cdsService(id: string): CdsService | undefined {
  return CDS_SERVICES.find((s) => s.id === id);
}

/** GET /cds-services. */
export function discovery(): { services: CdsService[] } {
  return { services: [...CDS_SERVICES] };
}

const feedbackSchema = z.object({
  feedback: z
    .array(
      z
        .object({
          card: z.string().min(1).max(128),
          outcome: z.enum(['accepted', 'overridden']),
          outcomeTimestamp: z.string().min(1),
        })
        .passthrough(),
    )
    .min(1)
    .max(100),
});

/** Reads a feedback body; the outcome of each entry (for the count). 400 naming the element otherwise. */
export function readFeedback(body: unknown): ('accepted' | 'overridden')[] {
  const parsed = feedbackSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join('.') || 'feedback';
    throw badRequest(`Not CDS Hooks feedback: ${path} ${issue?.message ?? 'is not valid'}`, path);
  }
  return parsed.data.feedback.map((f) => f.outcome);
}
