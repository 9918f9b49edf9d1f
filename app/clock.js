/**
 * Times as the clinic reads them: in the tenant's time zone (`timeZone` of the tenants file,
 * Asia/Dubai by default, from /app/api/settings), never in UTC. FHIR instants stay in UTC.
 */
let zone = 'Asia/Dubai';

export function setTimeZone(value) {
  zone = value || 'Asia/Dubai';
}

/** `Asia/Dubai` -> `Dubai time`; `UTC` stays `UTC`. */
function zoneLabel() {
  if (zone === 'UTC' || zone === 'Etc/UTC') return 'UTC';
  return `${zone.split('/').pop().replace(/_/g, ' ')} time`;
}

/** An ISO instant as `2026-11-24 06:31 Dubai time`; '' for none, the text itself when it is no instant. */
export function when(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const parts = {};
  const format = new Intl.DateTimeFormat('en-GB', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  for (const part of format.formatToParts(date)) parts[part.type] = part.value;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute} ${zoneLabel()}`;
}

/** An ISO instant's day in the clinic's zone, `YYYY-MM-DD` (a date field's value); '' for none. */
export function localDay(iso) {
  const date = new Date(iso ?? '');
  if (Number.isNaN(date.getTime())) return '';
  return new Intl.DateTimeFormat('en-CA', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).format(date);
}
