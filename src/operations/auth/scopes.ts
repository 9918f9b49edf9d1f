/**
 * SMART system scopes (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html):
 * `system/<Type>.<permissions>`, where the permissions are SMART v2's `cruds` letters in that
 * order (`.rs`, `.c`, `.cruds`) or SMART v1's `.read` (= `rs`), `.write` (= `cud`) and `.*`
 * (= `cruds`); `*` as the type stands for every type. Pure functions: parse, grant, permit.
 */
import { SMART_SCOPE } from '../../config.js';

/** The v2 permission letters, in the order the scope syntax writes them. */
const LETTERS = ['c', 'r', 'u', 'd', 's'] as const;
export type Permission = (typeof LETTERS)[number];

const V1: Record<string, string> = { read: 'rs', write: 'cud', '*': 'cruds' };

/** One system scope: a resource type (or `*`) and a set of permissions. */
export interface Scope {
  type: string;
  permissions: ReadonlySet<Permission>;
  /** As written by the client or the tenants file. */
  text: string;
}

/** Parses one scope; null when it is not a system scope this service knows. */
export function parseScope(text: string): Scope | null {
  const match = SMART_SCOPE.exec(text);
  if (!match?.[1] || match[2] === undefined || match[2] === '') return null;
  const letters = V1[match[2]] ?? match[2];
  return { type: match[1], permissions: new Set([...letters] as Permission[]), text };
}

/** A space-separated scope list (RFC 6749 section 3.3), parsed; unknown scopes are kept apart. */
export function parseScopes(text: string): { scopes: Scope[]; unknown: string[] } {
  const scopes: Scope[] = [];
  const unknown: string[] = [];
  for (const item of text.split(' ').filter(Boolean)) {
    const scope = parseScope(item);
    if (scope) scopes.push(scope);
    else unknown.push(item);
  }
  return { scopes, unknown };
}

function v2Text(type: string, permissions: ReadonlySet<Permission>): string {
  return `system/${type}.${LETTERS.filter((l) => permissions.has(l)).join('')}`;
}

/**
 * The scopes granted for what a client asked, within what it is allowed: each asked scope meets
 * each allowed one (the narrower type, the common permissions). A scope granted whole keeps the
 * client's spelling (v1 stays v1); a part of one is written in v2. Nothing in common: left out.
 */
export function grantScopes(asked: readonly Scope[], allowed: readonly Scope[]): Scope[] {
  const granted = new Map<string, Scope>();
  for (const want of asked) {
    for (const may of allowed) {
      if (want.type !== '*' && may.type !== '*' && want.type !== may.type) continue;
      const type = want.type === '*' ? may.type : want.type;
      const permissions = new Set(LETTERS.filter((l) => want.permissions.has(l) && may.permissions.has(l)));
      if (permissions.size === 0) continue;
      const whole = type === want.type && permissions.size === want.permissions.size;
      const text = whole ? want.text : v2Text(type, permissions);
      granted.set(text, { type, permissions, text });
    }
  }
  return [...granted.values()];
}

/** Whether the scopes together allow every permission asked on a resource type. */
export function permits(scopes: readonly Scope[], type: string, needed: readonly Permission[]): boolean {
  return needed.every((letter) =>
    scopes.some((scope) => (scope.type === '*' || scope.type === type) && scope.permissions.has(letter)),
  );
}
