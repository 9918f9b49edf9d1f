/** Small DOM helpers of the page: elements from plain values, user text isolated and cleaned. */

export const $ = (id) => document.getElementById(id);

/**
 * The explicit bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): taken out
 * of any text from a user or the portal, so a name cannot reverse itself or what follows it
 * (Unicode UAX #9). Arabic text needs none of them: <bdi> and dir="auto" give its direction.
 */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

/** Text from outside the page, without bidi controls. */
export const clean = (text) => String(text ?? '').replace(BIDI_CONTROLS, '');

/** An element with attributes (`text` sets its text, `on…` adds a listener) and children. */
export function el(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === 'text') element.textContent = value;
    else if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value);
  }
  element.append(...children);
  return element;
}

/** A name or text that may be Arabic, isolated so it reads right-to-left inside this page. */
export const bdi = (text) => el('bdi', { text: clean(text) });
