/**
 * A SMART EHR for the launch tests, on loopback: panva's oidc-provider (an OpenID-certified
 * provider) as its authorization server, configured as SMART asks (PKCE S256, `launch` and
 * `launch/patient` scopes, `fhirUser` in the ID token, `patient` and `fhirContext` in the token
 * response, a public or private_key_jwt client), and a small FHIR server (node http) that serves
 * its `.well-known/smart-configuration`, a Patient, its Coverage and an Appointment, each only to
 * a bearer token the provider issued. It counts every request it gets.
 * https://hl7.org/fhir/smart-app-launch/app-launch.html
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Appointment, Bundle, Coverage, Patient, Practitioner } from 'fhir/r4.js';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import Provider from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';

export const EHR_PATIENT_ID = 'pat-1';
export const EHR_APPOINTMENT_ID = 'appt-1';
/** The patient's Emirates ID (a valid check digit: the sandbox's eligible member). */
export const EHR_EMIRATES_ID = '784-1990-0000001-0';
export const EHR_CARD_NUMBER = 'DAM-558-2231';
export const EHR_PAYER = 'DAMAN';
export const EHR_PRACTITIONER = 'Practitioner/prac-7';
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

/** The EHR's records, by path under its FHIR base. */
export function ehrRecords(visitStart: string): {
  patient: Patient;
  coverage: Coverage;
  appointment: Appointment;
  practitioner: Practitioner;
} {
  return {
    practitioner: {
      resourceType: 'Practitioner',
      id: 'prac-7',
      name: [{ given: ['Mariam'], family: 'Haddad' }],
    },
    patient: {
      resourceType: 'Patient',
      id: EHR_PATIENT_ID,
      identifier: [
        {
          type: { coding: [{ system: V2_0203, code: 'NI' }] },
          system: 'http://ica.gov.ae/emirates-id',
          value: EHR_EMIRATES_ID,
        },
      ],
      name: [{ given: ['Aisha'], family: 'Al Mansoori' }],
      birthDate: '1990-04-12',
    },
    coverage: {
      resourceType: 'Coverage',
      id: 'cov-1',
      status: 'active',
      subscriberId: EHR_CARD_NUMBER,
      beneficiary: { reference: `Patient/${EHR_PATIENT_ID}` },
      payor: [{ identifier: { type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: EHR_PAYER } }],
    },
    appointment: {
      resourceType: 'Appointment',
      id: EHR_APPOINTMENT_ID,
      status: 'booked',
      start: visitStart,
      participant: [{ actor: { reference: `Patient/${EHR_PATIENT_ID}` }, status: 'accepted' }],
    },
  };
}

export interface EhrRequest {
  method: string;
  /** Path and query as received. */
  url: string;
  authorization: string | undefined;
  status: number;
}

export type IdTokenTamper = 'none' | 'signature' | 'other-key';

/** The ID token spoiled as `tamper` says (see SmartEhr.idTokenTamper). */
async function spoiled(idToken: string, tamper: IdTokenTamper): Promise<string> {
  if (tamper === 'none') return idToken;
  const [head = '', payload = '', signature = ''] = idToken.split('.');
  if (tamper === 'signature') {
    const bytes = Buffer.from(signature, 'base64url');
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] ?? 0) ^ 0x01;
    return `${head}.${payload}.${bytes.toString('base64url')}`;
  }
  const { privateKey } = await generateKeyPair('RS256');
  const header = decodeProtectedHeader(idToken);
  return new SignJWT(decodeJwt(idToken))
    .setProtectedHeader({ alg: String(header.alg), kid: String(header.kid), typ: header.typ ?? 'JWT' })
    .sign(privateKey);
}

export interface SmartEhrOptions {
  clientId: string;
  redirectUri: string;
  /** The client's public JWKS: a confidential client (private_key_jwt); absent: a public client. */
  clientJwks?: { keys: Record<string, unknown>[] };
}

export interface SmartEhr {
  /** The FHIR base the adapter is launched with (`iss`). */
  fhirBase: string;
  issuer: string;
  /** Every request the FHIR server got (smart-configuration and reads). */
  fhirRequests: EhrRequest[];
  /** The authorization requests' query parameters, as the provider received them. */
  authorizations: URLSearchParams[];
  /** The token requests' bodies (grant_type, code_verifier, client_assertion ...). */
  tokenRequests: URLSearchParams[];
  /** Every access token and ID token the provider issued (to prove none reached the browser). */
  issued: string[];
  /**
   * How the token endpoint's next ID tokens are spoiled (set by a test, `none` by default):
   * `signature`: one byte of the signature changed; `other-key`: the same claims and header (kid
   * `ehr-1`, RS256) signed by a key the EHR's jwks_uri does not publish.
   */
  idTokenTamper: IdTokenTamper;
  /** A new EHR launch id for the patient (and the appointment, unless `appointment: false`). */
  newLaunch(options?: { appointment?: boolean }): string;
  close(): Promise<void>;
}

/** Default visit: two days from now at 10:30 in Dubai (+04:00). */
function defaultVisitStart(): string {
  const day = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
  return `${day}T10:30:00+04:00`;
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    );
  });
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/fhir+json' });
  res.end(JSON.stringify(body));
}

/**
 * Starts the FHIR server first (its URL goes into the tenants file), then the provider once the
 * adapter's redirect URI is known: `startSmartEhr()` then `ehr.provider(options)`.
 */
export async function startFhirServer(visitStart = defaultVisitStart()): Promise<{
  fhirBase: string;
  requests: EhrRequest[];
  attach(options: SmartEhrOptions): Promise<SmartEhr>;
  close(): Promise<void>;
}> {
  const requests: EhrRequest[] = [];
  const records = ehrRecords(visitStart);
  // Until a provider is attached, the records are served to anyone: behind a SMART launcher's
  // proxy, which checks the launcher's tokens itself and does not pass them on.
  let handler = (req: IncomingMessage, res: ServerResponse): Promise<number> =>
    Promise.resolve(serveRecords(req, res, fhirBase, records));
  const server = createServer((req, res) => {
    const entry: EhrRequest = {
      method: req.method ?? 'GET',
      url: req.url ?? '',
      authorization: req.headers.authorization,
      status: 0,
    };
    requests.push(entry);
    const answer = handler(req, res);
    void answer.then(
      (status) => (entry.status = status),
      () => {
        entry.status = 500;
        if (!res.headersSent) json(res, 500, {});
      },
    );
  });
  const origin = await listen(server);
  const fhirBase = `${origin}/fhir`;
  let provider: Server | null = null;
  return {
    fhirBase,
    requests,
    async attach(options) {
      const ehr = await startProvider(fhirBase, requests, records, options);
      handler = ehr.handle;
      provider = ehr.server;
      return ehr.ehr;
    },
    async close() {
      if (provider) await close(provider);
      await close(server);
    },
  };
}

interface LaunchContext {
  patient: string;
  appointment?: string;
}

/** Patient/<id>, Appointment/<id> and Coverage?patient=<id>; 404 for anything else. */
function serveRecords(
  req: IncomingMessage,
  res: ServerResponse,
  fhirBase: string,
  records: ReturnType<typeof ehrRecords>,
): number {
  const url = new URL(req.url ?? '/', fhirBase);
  const path = url.pathname.replace(/^\/fhir/, '');
  if (path === '/Coverage' && url.searchParams.get('patient') === EHR_PATIENT_ID) {
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: 1,
      entry: [
        { fullUrl: `${fhirBase}/Coverage/cov-1`, resource: records.coverage, search: { mode: 'match' } },
      ],
    };
    json(res, 200, bundle);
    return 200;
  }
  const found: Record<string, unknown> = {
    [`/Patient/${EHR_PATIENT_ID}`]: records.patient,
    [`/Appointment/${EHR_APPOINTMENT_ID}`]: records.appointment,
    [`/${EHR_PRACTITIONER}`]: records.practitioner,
  };
  const resource = found[path];
  json(res, resource ? 200 : 404, resource ?? { resourceType: 'OperationOutcome', issue: [] });
  return resource ? 200 : 404;
}

async function startProvider(
  fhirBase: string,
  fhirRequests: EhrRequest[],
  records: ReturnType<typeof ehrRecords>,
  options: SmartEhrOptions,
): Promise<{
  ehr: SmartEhr;
  server: Server;
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<number>;
}> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'ehr-1', alg: 'RS256', use: 'sig' };
  const launches = new Map<string, LaunchContext>();
  /** The context of each grant (its launch, or the patient picked in a standalone launch). */
  const contextOfGrant = new Map<string, LaunchContext>();
  const authorizations: URLSearchParams[] = [];
  const tokenRequests: URLSearchParams[] = [];
  const issued: string[] = [];

  const scopes = [
    'openid',
    'fhirUser',
    'launch',
    'launch/patient',
    'patient/Patient.rs',
    'patient/Coverage.rs',
    'patient/Appointment.rs',
  ];
  const configuration: Configuration = {
    clients: [
      {
        client_id: options.clientId,
        redirect_uris: [options.redirectUri],
        response_types: ['code'],
        grant_types: ['authorization_code'],
        ...(options.clientJwks
          ? {
              token_endpoint_auth_method: 'private_key_jwt',
              token_endpoint_auth_signing_alg: (options.clientJwks.keys[0]?.alg ?? 'RS384') as 'RS384',
              jwks: options.clientJwks,
            }
          : { token_endpoint_auth_method: 'none' }),
      },
    ],
    jwks: { keys: [signingKey] },
    // The SMART scopes, and fhirUser as a claim of its own scope, in the ID token itself.
    scopes,
    claims: { openid: ['sub'], fhirUser: ['fhirUser'], profile: ['name'] },
    conformIdTokenClaims: false,
    // SMART's authorization parameters beside OAuth's: the EHR's launch id and the audience.
    extraParams: ['launch', 'aud'],
    pkce: { required: () => true },
    enabledJWA: { clientAuthSigningAlgValues: ['RS384', 'ES384', 'RS256', 'ES256'] },
    features: { devInteractions: { enabled: false } },
    cookies: { keys: [randomUUID()] },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: (_ctx, sub) => ({
      accountId: sub,
      claims: () => ({ sub, fhirUser: EHR_PRACTITIONER, name: 'Mariam Haddad' }),
    }),
    ttl: {
      AccessToken: 600,
      AuthorizationCode: 60,
      IdToken: 600,
      Interaction: 600,
      Session: 600,
      Grant: 600,
    },
  };
  const server = createServer();
  const issuer = await listen(server);
  const ehr: SmartEhr = {
    fhirBase,
    issuer,
    fhirRequests,
    authorizations,
    tokenRequests,
    issued,
    newLaunch(launchOptions = {}) {
      const id = randomUUID();
      launches.set(id, {
        patient: EHR_PATIENT_ID,
        ...(launchOptions.appointment === false ? {} : { appointment: `Appointment/${EHR_APPOINTMENT_ID}` }),
      });
      return id;
    },
    close: () => Promise.resolve(),
    idTokenTamper: 'none',
  };
  const provider = new Provider(issuer, configuration);

  // The authorization request as sent (to check PKCE, aud, launch and scope), and each token
  // response given the launch context (SMART: `patient`, `fhirContext` beside the tokens).
  provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
    if (ctx.path === '/auth') authorizations.push(new URLSearchParams(ctx.querystring));
    await next();
    if (ctx.path === '/token' && ctx.method === 'POST') {
      const sent = (ctx.oidc as unknown as { body?: Record<string, string> } | undefined)?.body;
      if (sent) tokenRequests.push(new URLSearchParams(sent));
    }
    if (ctx.path === '/token' && ctx.status === 200) {
      const body = ctx.body as Record<string, unknown>;
      const code = ctx.oidc.entities.AuthorizationCode;
      const context = code?.grantId ? contextOfGrant.get(code.grantId) : undefined;
      if (typeof body.access_token === 'string') issued.push(body.access_token);
      if (typeof body.id_token === 'string') {
        issued.push(body.id_token);
        body.id_token = await spoiled(body.id_token, ehr.idTokenTamper);
      }
      if (context) {
        body.patient = context.patient;
        if (context.appointment) body.fhirContext = [{ reference: context.appointment }];
      }
    }
  });

  // The EHR's own sign-in is out of scope: the interaction signs the practitioner in and grants
  // what was asked at once (an EHR where the user is already signed in).
  const callback = provider.callback();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const match = /^\/interaction\/([^/?]+)/.exec(req.url ?? '');
    if (!match) {
      void callback(req, res);
      return;
    }
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      const params = details.params as Record<string, string | undefined>;
      const clientId = String(params.client_id);
      const grant = new provider.Grant({ accountId: 'prac-7', clientId });
      grant.addOIDCScope(String(params.scope ?? ''));
      const grantId = await grant.save();
      const launch = params.launch ? launches.get(params.launch) : undefined;
      // A standalone launch (launch/patient): the EHR's patient picker, here its one patient.
      const context =
        launch ?? (String(params.scope).includes('launch/patient') ? { patient: EHR_PATIENT_ID } : undefined);
      if (context) contextOfGrant.set(grantId, context);
      await provider.interactionFinished(req, res, {
        login: { accountId: 'prac-7' },
        consent: { grantId },
      });
    })().catch(() => {
      res.writeHead(500).end();
    });
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<number> => {
    const url = new URL(req.url ?? '/', fhirBase);
    const path = url.pathname.replace(/^\/fhir/, '');
    if (path === '/.well-known/smart-configuration') {
      json(res, 200, {
        issuer,
        jwks_uri: `${issuer}/jwks`,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        token_endpoint_auth_methods_supported: ['private_key_jwt', 'none'],
        token_endpoint_auth_signing_alg_values_supported: ['RS384', 'ES384'],
        grant_types_supported: ['authorization_code'],
        code_challenge_methods_supported: ['S256'],
        scopes_supported: scopes,
        response_types_supported: ['code'],
        capabilities: [
          'launch-ehr',
          'launch-standalone',
          'client-public',
          'client-confidential-asymmetric',
          'sso-openid-connect',
          'context-ehr-patient',
          'context-standalone-patient',
          'permission-patient',
          'permission-v2',
        ],
      });
      return 200;
    }
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    const accessToken = token ? await provider.AccessToken.find(token) : undefined;
    if (!accessToken) {
      json(res, 401, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'login' }] });
      return 401;
    }
    return serveRecords(req, res, fhirBase, records);
  };

  return {
    server,
    handle,
    ehr,
  };
}
