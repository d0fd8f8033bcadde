/**
 * HTML built by a tagged template that escapes every interpolated value, so nothing reaches
 * the page unescaped unless it was itself built by `html` (or is a trusted constant `raw`).
 * @module
 */

/** Markup that is already safe: the output of `html`, or a constant marked `raw`. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Interpolatable values: text is escaped, `Html` is kept, arrays are joined, nullish and `false` vanish. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.value;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** `html\`<td>${text}</td>\`` escapes `text`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/** Marks a constant (never data) as markup. */
export const raw = (markup: string): Html => new Html(markup);
