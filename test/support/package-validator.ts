/**
 * Validation of an emitted resource against the adapter's FHIR package, as the HL7 FHIR validator
 * does it with `-ig <the package>`, with the definitions read by an independent loader
 * (fhir-package.ts). Three layers:
 *
 * 1. the project's validator (src/fhir/validator.ts: `@medplum/core` with the R4 definitions, the
 *    required bindings, dom-3): structure, cardinality, invariants of the base resource;
 * 2. `@medplum/core` `validateResource(resource, { profile })` with each profile the resource names
 *    in `meta.profile`, taken from the loaded package: the profile's cardinalities, fixed and
 *    pattern values, and the counts of its slices. A resource of a kind the package profiles must
 *    name its profile; a profile it names must be in the package;
 * 3. the HL7 validator's extension rules, which medplum does not apply (an unknown extension, an
 *    extension in the wrong place or with the wrong value type all pass it silently), written here
 *    after `InstanceValidator.checkExtension` and `checkExtensionContext` of the HL7 validator
 *    (org.hl7.fhir.validation), with its messages (org.hl7.fhir.utilities Messages.properties):
 *    every `extension` and `modifierExtension` anywhere (contained resources, Bundle entries,
 *    primitive values' `_x`, values of extensions, parts of complex extensions):
 *    - its url resolves to a StructureDefinition in the loaded packages (Extension_EXT_Unknown_NotHere);
 *    - its `context` allows the element it is on (Extension_EXTP_Context_Wrong, Extension_EXTM_Context_Wrong);
 *    - modifier or not as defined (Extension_EXT_Modifier_Y, Extension_EXT_Modifier_N);
 *    - its value's type is one its `value[x]` allows (Extension_EXT_Type), a value is there when the
 *      definition is simple (Extension_EXT_Simple_ABSENT) and absent when complex;
 *    - a part (relative url) of a complex extension is a slice of its snapshot
 *      (Extension_EXT_SubExtension_Invalid), with a value type that slice allows, and the slices'
 *      cardinalities hold.
 *    Every definition read must have a snapshot (the HL7 validator reads only snapshots).
 */
import { OperationOutcomeError, loadDataType, validateResource } from '@medplum/core';
import type {
  StructureDefinition as MedplumStructureDefinition,
  Resource as MedplumResource,
} from '@medplum/fhirtypes';
import type { ElementDefinition, Extension, FhirResource, StructureDefinition } from 'fhir/r4.js';
import { validateFhir } from '../../src/fhir/validator.js';
import type { LoadedPackage } from './fhir-package.js';

/**
 * The HL7 validator's fixContexts: R4 core puts structuredefinition-fhir-type on ElementDefinition.type
 * though its context says ElementDefinition.type.code, and regex on ElementDefinition.type too
 * (https://jira.hl7.org/browse/FHIR-13328); it accepts both there.
 */
function fixedContexts(url: string): { type: 'element'; expression: string }[] {
  return url === 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type' ||
    url === 'http://hl7.org/fhir/StructureDefinition/regex'
    ? [{ type: 'element', expression: 'ElementDefinition.type' }]
    : [];
}

/** medplum's slice count, replaced by checkSlicing (its nested and extension slices are wrong). */
const SLICE_COUNT = 'Incorrect number of values provided for slice';

export interface PackageIssue {
  /** The HL7 validator's message id, or `base`/`profile` for the other layers. */
  id: string;
  /** FHIRPath-like location, with indexes. */
  path: string;
  text: string;
}

/** The definitions the checks read: a loaded package. */
export type Definitions = Pick<
  LoadedPackage,
  'structureDefinition' | 'coreType' | 'resources' | 'packageJson'
>;

interface Node {
  /** The path as written, with indexes (for the issue). */
  at: string;
  /** The path from the root resource, without indexes (stack.getLiteralPath, stripped). */
  literal: string;
  /** The definition paths of the element (stack.getLogicalPaths): its path within its type, and the type's name. */
  logical: string[];
  isResource: boolean;
  /** The core type and element path that define the node's children. */
  type: string;
  elementPath: string;
  /** On an Extension node: its url (for a context of type `extension`). */
  extensionUrl?: string;
}

export class PackageValidator {
  private readonly profiles = new Map<string, StructureDefinition>();
  /** Resource types the package profiles: their resources must name a profile. */
  readonly profiledTypes = new Set<string>();
  private readonly primitives = new Set<string>();
  private readonly loaded = new Set<string>();

  constructor(private readonly defs: Definitions) {
    for (const r of defs.resources) {
      if (r.resourceType !== 'StructureDefinition') continue;
      if (r.derivation === 'constraint' && r.kind === 'resource') {
        this.profiles.set(r.url, r);
        // The adapter's own profiles (not those copied from another guide) say what it emits.
        if (r.url.startsWith(`${String(defs.packageJson.canonical)}/`)) this.profiledTypes.add(r.type);
      }
    }
    for (const name of [
      'string',
      'boolean',
      'code',
      'uri',
      'url',
      'canonical',
      'id',
      'oid',
      'uuid',
      'markdown',
    ])
      this.primitives.add(name);
    for (const name of [
      'integer',
      'decimal',
      'unsignedInt',
      'positiveInt',
      'date',
      'dateTime',
      'instant',
      'time',
    ])
      this.primitives.add(name);
    this.primitives.add('base64Binary');
    this.primitives.add('xhtml');
  }

  /** Every issue of the resource (root, contained, Bundle entries) against the package. */
  validate(resource: FhirResource): PackageIssue[] {
    const issues: PackageIssue[] = [];
    for (const i of validateFhir(resource).issues)
      if (i.severity === 'error' || i.severity === 'fatal')
        issues.push({ id: 'base', path: (i.expression ?? []).join(','), text: i.details?.text ?? i.code });
    this.visitResource(resource, resource.resourceType, resource.resourceType, issues);
    return issues;
  }

  private visitResource(resource: FhirResource, at: string, literal: string, issues: PackageIssue[]): void {
    this.checkProfiles(resource, at, issues);
    const type = resource.resourceType;
    if (!this.defs.coreType(type)) {
      issues.push({
        id: 'Validation_VAL_Profile_NoDefinition',
        path: at,
        text: `No definition found for resource type '${type}'`,
      });
      return;
    }
    const node: Node = {
      at,
      literal,
      logical: [type],
      isResource: true,
      type,
      elementPath: type,
    };
    this.visitObject(resource as unknown as Record<string, unknown>, node, issues);
  }

  /** meta.profile: named for a profiled kind, found in the package, and met (medplum, with the loaded profile). */
  private checkProfiles(resource: FhirResource, at: string, issues: PackageIssue[]): StructureDefinition[] {
    const named = resource.meta?.profile ?? [];
    const met: StructureDefinition[] = [];
    if (this.profiledTypes.has(resource.resourceType) && !named.some((u) => this.profiles.has(u)))
      issues.push({
        id: 'profile',
        path: `${at}.meta.profile`,
        text: `A ${resource.resourceType} must name its profile of the package (one of ${[
          ...this.profiles.values(),
        ]
          .filter((p) => p.type === resource.resourceType)
          .map((p) => p.url)
          .join(', ')})`,
      });
    for (const url of named) {
      const profile = this.profiles.get(url);
      if (!profile) {
        issues.push({
          id: 'Validation_VAL_Profile_Unknown',
          path: `${at}.meta.profile`,
          text: `Profile reference '${url}' has not been checked because it could not be found`,
        });
        continue;
      }
      if (profile.type !== resource.resourceType) {
        issues.push({
          id: 'Validation_VAL_Profile_WrongType',
          path: at,
          text: `Specified profile type was '${profile.type}' in profile '${url}', but found type '${resource.resourceType}'`,
        });
        continue;
      }
      if (!profile.snapshot) {
        issues.push({ id: 'profile', path: at, text: `The profile ${url} has no snapshot` });
        continue;
      }
      met.push(profile);
      if (!this.loaded.has(url)) {
        loadDataType(profile as unknown as MedplumStructureDefinition);
        this.loaded.add(url);
      }
      // medplum returns warnings and throws its errors (an OperationOutcomeError with all of them).
      let found: { severity?: string; details?: { text?: string }; expression?: string[] }[];
      try {
        found = validateResource(resource as unknown as MedplumResource, {
          profile: profile as unknown as MedplumStructureDefinition,
        });
      } catch (err) {
        found =
          err instanceof OperationOutcomeError
            ? err.outcome.issue
            : [{ severity: 'error', details: { text: String((err as Error).message) } }];
      }
      for (const i of found)
        if (i.severity === 'error' && !i.details?.text?.startsWith(SLICE_COUNT))
          issues.push({
            id: 'profile',
            path: `${at} (${(i.expression ?? []).join(',')})`,
            text: `${url}: ${i.details?.text ?? ''}`,
          });
      this.checkSlicing(resource, profile, at, issues);
    }
    return met;
  }

  /**
   * The slicing of a profile, evaluated here instead of by medplum: medplum 4.5.2 does not match an
   * extension slice that names its extension by type profile (as generated snapshots do), applies
   * a slice nested in a slice (Parameters.parameter:notificationEvent.part:eventNumber) to every
   * repetition of the outer element, and does not match by `type` of a resource. Each sliced
   * element of the profile is matched the way the HL7 validator discriminates (value/pattern by a
   * fixed or pattern value or, for `url` of an extension, by the slice's type profile; type of a
   * resource), then each slice's cardinality is checked (Validation_VAL_Profile_Maximum,
   * Validation_VAL_Profile_Minimum_SLICE) and an item matching no slice of a closed slicing is an
   * error (Validation_VAL_Profile_NotSlice). Slices are followed into what they matched.
   */
  private checkSlicing(
    resource: FhirResource,
    profile: StructureDefinition,
    at: string,
    issues: PackageIssue[],
  ): void {
    const elements = profile.snapshot?.element ?? [];
    const byId = new Map(elements.map((e) => [e.id ?? e.path, e]));
    const children = new Map<string, string[]>();
    const slices = new Map<string, ElementDefinition[]>();
    for (const e of elements) {
      const id = e.id ?? e.path;
      const dot = id.lastIndexOf('.');
      if (dot < 0) continue;
      const last = id.slice(dot + 1);
      const colon = last.indexOf(':');
      if (colon < 0) push(children, id.slice(0, dot), id);
      else if (!last.slice(colon + 1).includes('/')) push(slices, id.slice(0, dot + 1 + colon), e);
    }
    const walk = (obj: Record<string, unknown>, elementId: string, where: string): void => {
      for (const childId of children.get(elementId) ?? []) {
        const name = childId.slice(childId.lastIndexOf('.') + 1);
        if (name.endsWith('[x]')) continue;
        const element = byId.get(childId);
        const list = asArray(obj[name]).filter(
          (v): v is Record<string, unknown> => typeof v === 'object' && v !== null,
        );
        const itemAt = (i: number) => `${where}.${name}${Array.isArray(obj[name]) ? `[${i}]` : ''}`;
        const sliced = element?.slicing ? (slices.get(childId) ?? []) : [];
        if (!element?.slicing) {
          list.forEach((item, i) => walk(item, childId, itemAt(i)));
          continue;
        }
        const counts = new Map<ElementDefinition, number>();
        list.forEach((item, i) => {
          const slice = sliced.find((sl) =>
            this.matchesSlice(item, sl, element.slicing?.discriminator ?? [], byId),
          );
          if (slice) {
            counts.set(slice, (counts.get(slice) ?? 0) + 1);
            walk(item, slice.id ?? '', itemAt(i));
            return;
          }
          if (element.slicing?.rules === 'closed')
            issues.push({
              id: 'Validation_VAL_Profile_NotSlice',
              path: itemAt(i),
              text: `This element does not match any known slice defined in the profile ${profile.url} and slicing is CLOSED`,
            });
          walk(item, childId, itemAt(i));
        });
        for (const slice of sliced) {
          const found = counts.get(slice) ?? 0;
          const max = slice.max === '*' ? Infinity : Number(slice.max ?? '1');
          if (found > max)
            issues.push({
              id: 'Validation_VAL_Profile_Maximum',
              path: `${where}.${name}`,
              text: `${slice.id ?? ''}: max allowed = ${slice.max ?? '1'}, but found ${found} (from ${profile.url})`,
            });
          if (found < (slice.min ?? 0))
            issues.push({
              id: 'Validation_VAL_Profile_Minimum_SLICE',
              path: `${where}.${name}`,
              text: `Slice '${slice.id ?? ''}': a matching slice is required, but not found (from ${profile.url})`,
            });
        }
      }
    };
    walk(resource as unknown as Record<string, unknown>, resource.resourceType, at);
  }

  private matchesSlice(
    item: Record<string, unknown>,
    slice: ElementDefinition,
    discriminators: { type: string; path: string }[],
    byId: Map<string, ElementDefinition>,
  ): boolean {
    if (discriminators.length === 0) return false;
    return discriminators.every(({ type, path }) => {
      if (type === 'value' || type === 'pattern') {
        const at = byId.get(`${slice.id ?? ''}.${path}`);
        const fixed = at ? fixedOf(at) : undefined;
        if (fixed !== undefined) return matchesPattern(item[path], fixed);
        // An extension slice names its extension by type profile: its url.
        const profileUrl = slice.type?.[0]?.profile?.[0];
        return path === 'url' && profileUrl !== undefined && item.url === profileUrl;
      }
      if (type === 'type' || type === 'profile') {
        const target = path === '$this' ? item : (item[path] as Record<string, unknown> | undefined);
        const typed = path === '$this' ? slice : byId.get(`${slice.id ?? ''}.${path}`);
        const code = typed?.type?.[0]?.code;
        if (!target || !code) return false;
        if (typeof target.resourceType === 'string' && target.resourceType !== code) return false;
        if (type === 'type') return true;
        const wanted = typed?.type?.[0]?.profile ?? [];
        const named = (target.meta as { profile?: string[] } | undefined)?.profile ?? [];
        return wanted.some((u) => named.includes(u));
      }
      return false;
    });
  }

  private visitObject(obj: Record<string, unknown>, node: Node, issues: PackageIssue[]): void {
    for (const [key, value] of Object.entries(obj)) {
      if (key === 'resourceType' || value === null || value === undefined) continue;
      if (key === 'extension' || key === 'modifierExtension') {
        asArray(value).forEach((ext, i) =>
          this.checkExtension(
            ext as Extension,
            key === 'modifierExtension',
            node,
            `${node.at}.${key}[${i}]`,
            issues,
          ),
        );
        continue;
      }
      const primitiveExtension = key.startsWith('_');
      const name = primitiveExtension ? key.slice(1) : key;
      const child = this.childElement(node, name);
      if (!child) continue; // an unknown element: the base validator reports it
      asArray(value).forEach((item, i) => {
        if (typeof item !== 'object' || item === null) return;
        const at = `${node.at}.${name}${Array.isArray(value) ? `[${i}]` : ''}`;
        const literal = `${node.literal}.${name}`;
        const definitionPath = child.path;
        if (child.type === 'Resource' && !primitiveExtension) {
          // contained, Bundle.entry.resource, Bundle.entry.response.outcome, Parameters.parameter.resource
          const res = item as FhirResource;
          if (typeof res.resourceType === 'string') this.visitResource(res, at, literal, issues);
          return;
        }
        if (primitiveExtension || this.primitives.has(child.type)) {
          this.visitObject(
            item as Record<string, unknown>,
            {
              at,
              literal,
              logical: [definitionPath, child.type],
              isResource: false,
              type: child.type,
              elementPath: child.type,
            },
            issues,
          );
          return;
        }
        const backbone = child.type === 'BackboneElement' || child.type === 'Element';
        this.visitObject(
          item as Record<string, unknown>,
          {
            at,
            literal,
            logical: backbone ? [definitionPath] : [definitionPath, child.type],
            isResource: false,
            type: backbone ? child.owner : child.type,
            elementPath: backbone ? child.path : child.type,
          },
          issues,
        );
      });
    }
  }

  /** The element definition of a JSON property under a node: path, type, and the type whose definition holds it. */
  private childElement(node: Node, name: string): { path: string; type: string; owner: string } | undefined {
    const sd = this.defs.coreType(node.type);
    const elements = sd?.snapshot?.element ?? [];
    const direct = `${node.elementPath}.${name}`;
    for (const e of elements) {
      if (e.path === direct) return this.typed(e, node.type);
      if (e.path.endsWith('[x]') && e.path.startsWith(`${node.elementPath}.`)) {
        const stem = e.path.slice(node.elementPath.length + 1, -3);
        if (!name.startsWith(stem) || stem.includes('.')) continue;
        const suffix = name.slice(stem.length);
        const type = (e.type ?? []).find((t) => capitalize(t.code) === suffix);
        if (type) return { path: e.path, type: type.code, owner: node.type };
      }
    }
    return undefined;
  }

  private typed(
    e: ElementDefinition,
    owner: string,
  ): { path: string; type: string; owner: string } | undefined {
    if (e.contentReference) {
      // `#Bundle.entry` style: the children are those of the referenced element.
      return { path: e.contentReference.slice(1), type: 'BackboneElement', owner };
    }
    const code = e.type?.[0]?.code;
    if (!code) return undefined;
    return {
      path: e.path,
      type: code.startsWith('http://hl7.org/fhirpath/System.') ? 'string' : code,
      owner,
    };
  }

  private checkExtension(
    ext: Extension,
    modifier: boolean,
    node: Node,
    at: string,
    issues: PackageIssue[],
  ): void {
    const url = ext?.url;
    if (typeof url !== 'string' || url.length === 0) {
      issues.push({
        id: 'Extension_EXT_Url_NotFound',
        path: at,
        text: 'Extension.url is required in order to identify, use and validate the extension',
      });
      return;
    }
    const definition = this.defs.structureDefinition(url);
    if (!definition || definition.type !== 'Extension') {
      issues.push({
        id: 'Extension_EXT_Unknown_NotHere',
        path: at,
        text: `The extension ${url} could not be found so is not allowed here`,
      });
      return;
    }
    const elements = definition.snapshot?.element;
    if (!elements?.length) {
      issues.push({ id: 'snapshot', path: at, text: `The extension ${url} has no snapshot` });
      return;
    }
    const root = elements[0] as ElementDefinition;
    if (modifier && !root.isModifier)
      issues.push({
        id: 'Extension_EXT_Modifier_Y',
        path: at,
        text: `The Extension '${url}' must not be used as a modifierExtension (it's a regular extension)`,
      });
    if (!modifier && root.isModifier)
      issues.push({
        id: 'Extension_EXT_Modifier_N',
        path: at,
        text: `The Extension '${url}' must not be used as an extension (it's a modifierExtension)`,
      });
    this.checkContext(definition, modifier, node, at, issues);
    const valueElement = elements.find((e) => e.path === 'Extension.value[x]');
    this.checkValue(ext, url, valueElement, at, issues);
    const parts = asArray(ext.extension);
    const extensionNode: Node = {
      at,
      literal: `${node.literal}.${modifier ? 'modifierExtension' : 'extension'}`,
      logical: [`${node.logical[0]}.${modifier ? 'modifierExtension' : 'extension'}`, 'Extension'],
      isResource: false,
      type: 'Extension',
      elementPath: 'Extension',
      extensionUrl: url,
    };
    const counts = new Map<string, number>();
    parts.forEach((part, i) => {
      const partAt = `${at}.extension[${i}]`;
      const p = part as Extension;
      if (typeof p?.url === 'string' && !/^[a-z][a-z0-9+.-]*:/i.test(p.url)) {
        // A part of this complex extension: a slice of its snapshot.
        const slice = elements.find(
          (e) =>
            e.path === 'Extension.extension' && e.sliceName !== undefined && sliceUrl(elements, e) === p.url,
        );
        if (!slice) {
          issues.push({
            id: 'Extension_EXT_SubExtension_Invalid',
            path: partAt,
            text: `Sub-extension url '${p.url}' is not defined by the Extension ${url}`,
          });
          return;
        }
        counts.set(slice.id ?? '', (counts.get(slice.id ?? '') ?? 0) + 1);
        const partValue = elements.find((e) => e.id === `${slice.id}.value[x]`);
        this.checkValue(p, `${url}#${p.url}`, partValue, partAt, issues);
        const sub = elements.find((e) => e.id === `${slice.id}.extension`);
        if (p.extension?.length && sub?.max === '0')
          issues.push({
            id: 'Validation_VAL_Profile_NotAllowed',
            path: `${partAt}.extension`,
            text: `This element is not allowed by the profile ${url}`,
          });
        this.visitValue(p, extensionNode, partAt, issues);
        return;
      }
      // A full extension inside this one: checked like any other, on the Extension element.
      this.checkExtension(p, false, extensionNode, partAt, issues);
    });
    for (const slice of elements.filter(
      (e) => e.path === 'Extension.extension' && e.sliceName !== undefined,
    )) {
      const n = counts.get(slice.id ?? '') ?? 0;
      const max = slice.max === '*' ? Infinity : Number(slice.max ?? '1');
      if (n > max)
        issues.push({
          id: 'Validation_VAL_Profile_Maximum',
          path: at,
          text: `${slice.id ?? ''}: max allowed = ${slice.max ?? '1'}, but found ${n} (from ${url})`,
        });
      if (n < (slice.min ?? 0))
        issues.push({
          id: 'Validation_VAL_Profile_Minimum_SLICE',
          path: at,
          text: `Slice '${slice.id ?? ''}': a matching slice is required, but not found (from ${url})`,
        });
    }
    this.visitValue(ext, extensionNode, at, issues);
  }

  /** The extensions inside an extension's value (a Coding's, an Attachment's ...). */
  private visitValue(ext: Extension, extensionNode: Node, at: string, issues: PackageIssue[]): void {
    for (const [key, value] of Object.entries(ext)) {
      if (!key.startsWith('value') && !key.startsWith('_value')) continue;
      const type = typeOfValueKey(key.replace(/^_/, ''), this.primitives);
      if (typeof value !== 'object' || value === null) continue;
      this.visitObject(
        value as Record<string, unknown>,
        {
          at: `${at}.${key}`,
          literal: `${extensionNode.literal}.value`,
          logical: ['Extension.value[x]', type],
          isResource: false,
          type,
          elementPath: type,
        },
        issues,
      );
    }
  }

  private checkValue(
    ext: Extension,
    url: string,
    valueElement: ElementDefinition | undefined,
    at: string,
    issues: PackageIssue[],
  ): void {
    const allowed = new Set(
      valueElement && valueElement.max !== '0' ? (valueElement.type ?? []).map((t) => t.code) : [],
    );
    const key = Object.keys(ext).find((k) => k.startsWith('value'));
    if (key) {
      const actual = typeOfValueKey(key, this.primitives);
      if (!allowed.has(actual))
        issues.push({
          id: 'Extension_EXT_Type',
          path: at,
          text: `The Extension '${url}' definition allows for the types [${[...allowed].join(', ')}] but found type ${actual}`,
        });
    } else if (!ext.extension?.length && allowed.size > 0) {
      issues.push({
        id: 'Extension_EXT_Simple_ABSENT',
        path: at,
        text: `The Extension '${url}' definition is for a simple extension, so it must contain a value`,
      });
    }
  }

  /** checkExtensionContext: the contexts of type `element` (and `extension`) against the node's paths. */
  private checkContext(
    definition: StructureDefinition,
    modifier: boolean,
    node: Node,
    at: string,
    issues: PackageIssue[],
  ): void {
    const paths = new Set([node.literal, ...node.logical]);
    // Any extension in an example, fixed or pattern value (InstanceValidator EXTENSION_CONTEXT_LIST).
    if ([...paths].some((p) => /^ElementDefinition\.(example\.value|pattern|fixed)/.test(p))) return;
    const contexts = [...(definition.context ?? []), ...fixedContexts(definition.url)];
    const ok = contexts.some((c) => {
      if (c.type === 'extension')
        return node.extensionUrl !== undefined && node.extensionUrl === c.expression;
      if (c.type !== 'element') return false;
      const e = c.expression;
      if (e === 'Element' || e === 'Any') return true;
      if (e === 'Resource' && node.isResource) return true;
      for (const p of paths) {
        if (p === e) return true;
        // The path against the type's ancestors: Coverage -> DomainResource -> Resource.
        const dot = p.indexOf('.');
        const head = dot < 0 ? p : p.slice(0, dot);
        const tail = dot < 0 ? '' : p.slice(dot);
        let sd = this.defs.coreType(head);
        while (sd) {
          if (`${sd.type}${tail}` === e) return true;
          sd = sd.baseDefinition ? this.defs.structureDefinition(sd.baseDefinition) : undefined;
        }
      }
      return false;
    });
    if (ok) return;
    const allowed = contexts
      .map((c) => `${c.type === 'element' ? 'e' : c.type === 'extension' ? 'x' : 'p'}:${c.expression}`)
      .join(',');
    const element = [...paths].sort().join(', ');
    issues.push(
      modifier
        ? {
            id: 'Extension_EXTM_Context_Wrong',
            path: at,
            text: `The modifier extension ${definition.url} is not allowed to be used at this point (this element is [${element}]; allowed = ${allowed})`,
          }
        : {
            id: 'Extension_EXTP_Context_Wrong',
            path: at,
            text: `The extension ${definition.url} is not allowed to be used at this point (this element is [${element}]; allowed for this version = ${allowed})`,
          },
    );
  }
}

/** The fixedUri of a slice's `url` child: the part's url. */
function sliceUrl(elements: ElementDefinition[], slice: ElementDefinition): string | undefined {
  return elements.find((e) => e.id === `${slice.id}.url`)?.fixedUri;
}

/** `valueCodeableConcept` -> CodeableConcept, `valueString` -> string (getExtensionType). */
function typeOfValueKey(key: string, primitives: Set<string>): string {
  const name = key.slice('value'.length);
  const lower = name.charAt(0).toLowerCase() + name.slice(1);
  return primitives.has(lower) ? lower : name;
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** The fixed[x] or pattern[x] value of an element definition, if any. */
function fixedOf(element: ElementDefinition): unknown {
  for (const [key, value] of Object.entries(element))
    if (key.startsWith('fixed') || key.startsWith('pattern')) return value;
  return undefined;
}

/** A value against a fixed or pattern value: equal for a primitive, every property of the pattern for an object. */
function matchesPattern(value: unknown, pattern: unknown): boolean {
  if (typeof pattern !== 'object' || pattern === null) return value === pattern;
  if (Array.isArray(pattern))
    return Array.isArray(value) && pattern.every((p) => value.some((v) => matchesPattern(v, p)));
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(pattern).every(([k, p]) => matchesPattern((value as Record<string, unknown>)[k], p));
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function asArray(value: unknown): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}
