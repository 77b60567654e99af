/**
 * The only way this page builds DOM: elements from a tag, attributes and
 * children, where every string child becomes a text node. Nothing here parses
 * HTML, so a value from a record, an error or an ordering key can only ever
 * appear as text.
 *
 * Attribute names are checked too: the page runs under
 * `Content-Security-Policy: default-src 'self'`, so an inline `style` or an
 * `on*` handler attribute would be refused by the browser anyway; refusing
 * them here turns that into an error at the call site. `href` and `src` only
 * take fragment (`#...`) and `blob:` URLs, so an untrusted `javascript:` value
 * can never become a link.
 */

/** What may be passed as a child: nodes, text (as a text node), or nothing. */
export type Child = Node | string | number | null | undefined | false;

/** Attribute values; `true` sets an empty attribute, `false`/`undefined` leaves it out. */
export type Attributes = Record<string, string | number | boolean | undefined>;

const SVG_NS = "http://www.w3.org/2000/svg";

function checkAttribute(name: string, value: string): void {
  const lower = name.toLowerCase();
  if (lower.startsWith("on") || lower === "style" || lower === "srcdoc") {
    throw new Error(`attribute \`${name}\` is not allowed (inline handlers and styles break the page's CSP)`);
  }
  if ((lower === "href" || lower === "src" || lower === "action" || lower === "formaction") && !/^(#|blob:)/.test(value)) {
    throw new Error(`attribute \`${name}\` only takes "#..." or "blob:" URLs`);
  }
}

function applyAttributes(element: Element, attributes: Attributes | undefined): void {
  if (!attributes) return;
  for (const [name, raw] of Object.entries(attributes)) {
    if (raw === undefined || raw === false) continue;
    const value = raw === true ? "" : String(raw);
    checkAttribute(name, value);
    element.setAttribute(name, value);
  }
}

function appendChildren(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
}

/**
 * Create an HTML element. String children are text nodes (never parsed).
 *
 * @example
 * el("p", { class: "error" }, "Could not load: ", error.message);
 */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attributes?: Attributes, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  applyAttributes(element, attributes);
  appendChildren(element, children);
  return element;
}

/** Create an SVG element (for the charts); the same rules as `el`. */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes?: Attributes, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  applyAttributes(element, attributes);
  appendChildren(element, children);
  return element;
}

/** Replace all children of `parent` (text stays text). */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  appendChildren(parent, children);
}

/** A button that is never a form submitter unless asked (`type="button"` by default). */
export function button(label: Child, onClick: (event: MouseEvent) => void, attributes: Attributes = {}): HTMLButtonElement {
  const element = el("button", { type: "button", ...attributes }, label);
  element.addEventListener("click", onClick);
  return element;
}
