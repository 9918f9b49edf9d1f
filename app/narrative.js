/**
 * Parts of a CER's narrative (FHIR XHTML built by the service, its text escaped there) as new DOM
 * nodes: the XHTML is parsed with the browser's XML parser and copied element by element, only
 * the formatting elements FHIR narrative allows and no attribute of its own, so nothing in it can
 * run or load. Links become plain text: documents are opened with the key from the list beside it.
 * The page takes the visit summary and the benefits table from it (one source with what an EHR
 * shows); the rest of the result it writes itself from the structured CER (result.js).
 */
import { clean } from './dom.js';

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
      into.append(document.createTextNode(clean(child.nodeValue)));
    } else if (child.nodeType === Node.ELEMENT_NODE && child.namespaceURI === XHTML) {
      const name = child.localName;
      if (ALLOWED.has(name)) {
        const element = document.createElement(name);
        // Arabic and other right-to-left text reads correctly inside this left-to-right page.
        if (['p', 'li', 'td', 'th'].includes(name)) element.dir = 'auto';
        copy(child, element);
        into.append(element);
      } else {
        // Not a formatting element (a link, or anything unexpected): its text only.
        into.append(document.createTextNode(clean(child.textContent)));
      }
    }
  }
}

/** The narrative's root div, parsed; null when it is not well-formed XHTML. */
function parse(div) {
  if (typeof div !== 'string') return null;
  const parsed = new DOMParser().parseFromString(div, 'application/xhtml+xml');
  const root = parsed.documentElement;
  if (
    parsed.getElementsByTagName('parsererror').length > 0 ||
    root.localName !== 'div' ||
    root.namespaceURI !== XHTML
  ) {
    return null;
  }
  return root;
}

/**
 * A copied table that reads on any width: every cell carries its column's name (data-label), so
 * on a narrow screen each row becomes a card of `name: value` lines (style.css) instead of a table
 * wider than the screen; empty cells are left out there.
 */
function benefitsTable(source) {
  const holder = document.createElement('div');
  copy({ childNodes: [source] }, holder);
  const table = holder.firstElementChild;
  const names = Array.from(table.querySelectorAll('thead th'), (th) => th.textContent.trim());
  for (const th of table.querySelectorAll('thead th')) th.scope = 'col';
  for (const row of table.querySelectorAll('tbody tr')) {
    Array.from(row.children).forEach((cell, i) => {
      if (names[i]) cell.dataset.label = names[i];
      if (cell.textContent.trim() === '') cell.classList.add('empty');
    });
  }
  table.className = 'benefits';
  return table;
}

/** A coverage's facts list in the narrative: the list that says `Eligible: yes|no|not determined`. */
const isCoverageFacts = (element) =>
  element.localName === 'ul' &&
  Array.from(element.children).some((li) => /^Eligible: /.test(li.textContent ?? ''));

/**
 * The narrative's benefits tables per coverage (in `insurance` order), each under the name of the
 * portal block it holds (`Outpatient benefits`, ...), copied and ready to show: [[heading, table,
 * ...], ...]. A coverage not in force has none. Tables before any coverage go with the first.
 */
export function benefitTables(div) {
  const root = parse(div);
  if (!root) return [];
  const groups = [];
  let heading = null;
  for (const child of Array.from(root.children)) {
    if (isCoverageFacts(child)) groups.push([]);
    else if (child.localName === 'h3') heading = child.textContent.trim();
    else if (child.localName === 'table') {
      if (groups.length === 0) groups.push([]);
      const group = groups[groups.length - 1];
      if (heading) group.push(Object.assign(document.createElement('h4'), { textContent: clean(heading) }));
      group.push(benefitsTable(child));
      heading = null;
    }
  }
  return groups;
}

/** The heading the narrative puts above each visit summary list (one per coverage in force). */
const SUMMARY_HEADING = /^What to collect\b/;

/**
 * The visit summaries at the top of a found member's narrative (what the patient pays for this
 * visit, one sentence per category), each as its heading and list, copied; [] when it has none.
 */
export function visitSummaries(div) {
  const root = parse(div);
  if (!root) return [];
  return Array.from(root.getElementsByTagNameNS(XHTML, 'ul'))
    .filter((list) => SUMMARY_HEADING.test(list.previousElementSibling?.textContent?.trim() ?? ''))
    .flatMap((list) => {
      const heading = document.createElement('h3');
      heading.textContent = clean(list.previousElementSibling.textContent.trim());
      const holder = document.createElement('div');
      copy({ childNodes: [list] }, holder);
      holder.firstElementChild.className = 'summary';
      return [heading, holder.firstElementChild];
    });
}
