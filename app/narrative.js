/**
 * Shows a CER's narrative (FHIR XHTML built by the service, its text escaped there) as new DOM
 * nodes: the XHTML is parsed with the browser's XML parser and copied element by element, only
 * the formatting elements FHIR narrative allows and no attribute at all, so nothing in it can run
 * or load. Links become plain text: documents are opened with the key from the list beside it.
 */
const ALLOWED = new Set([
  'p',
  'b',
  'i',
  'em',
  'strong',
  'ul',
  'ol',
  'li',
  'table',
  'thead',
  'tbody',
  'tr',
  'th',
  'td',
  'br',
  'span',
  'div',
]);
const XHTML = 'http://www.w3.org/1999/xhtml';

function copy(node, into) {
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) {
      into.append(document.createTextNode(child.nodeValue ?? ''));
    } else if (child.nodeType === Node.ELEMENT_NODE && child.namespaceURI === XHTML) {
      const name = child.localName;
      if (ALLOWED.has(name)) {
        const element = document.createElement(name);
        // Arabic and other right-to-left text reads correctly inside this left-to-right page.
        if (['p', 'li', 'td', 'th'].includes(name)) element.dir = 'auto';
        copy(child, element);
        if (name === 'table') {
          const scroller = document.createElement('div');
          scroller.className = 'table-scroll';
          scroller.tabIndex = 0;
          scroller.setAttribute('role', 'region');
          scroller.setAttribute('aria-label', 'Benefits by service category');
          scroller.append(element);
          into.append(scroller);
        } else into.append(element);
      } else {
        // Not a formatting element (a link, or anything unexpected): its text only.
        into.append(document.createTextNode(child.textContent ?? ''));
      }
    }
  }
}

/** Replaces `target`'s content with the narrative; false when it is not well-formed XHTML. */
export function showNarrative(target, div) {
  target.replaceChildren();
  if (typeof div !== 'string') return false;
  const parsed = new DOMParser().parseFromString(div, 'application/xhtml+xml');
  const root = parsed.documentElement;
  if (
    parsed.getElementsByTagName('parsererror').length > 0 ||
    root.localName !== 'div' ||
    root.namespaceURI !== XHTML
  ) {
    return false;
  }
  copy(root, target);
  return true;
}

/** The first bold text of a narrative: the outcome in words (Eligible, Not eligible, ...). */
export function headlineOf(div) {
  if (typeof div !== 'string') return '';
  const parsed = new DOMParser().parseFromString(div, 'application/xhtml+xml');
  return parsed.getElementsByTagNameNS(XHTML, 'b')[0]?.textContent ?? '';
}
