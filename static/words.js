// The words a page's scripts show, rendered by the server in the page's language (a
// <template id="script-words"> of <span data-word="key">, templates/_settings_script_words.html). A script
// names a sentence by its key and fills its {named} values; it holds no words of its own.

import { pageLocale } from "./clock.js";

const locale = pageLocale();
const numbers = new Intl.NumberFormat(locale);
const plurals = new Intl.PluralRules(locale);

function held(key) {
  const template = document.getElementById("script-words");
  return template?.content.querySelector(`[data-word="${CSS.escape(key)}"]`) ?? null;
}

function filled(text, values) {
  return text.replace(/\{(\w+)\}/g, (whole, name) => {
    if (!(name in values)) return whole;
    const value = values[name];
    return typeof value === "number" ? numbers.format(value) : String(value);
  });
}

/** The sentence `key` with its {named} values (numbers in the page's language's own forms). */
export function words(key, values = {}) {
  const element = held(key);
  return element ? filled(element.textContent, values) : key;
}

/** The sentence `key` for `count` ({count}), in the plural form the page's language uses for that number. */
export function counted(key, count, values = {}) {
  const element = held(key);
  if (!element) return key;
  // The server renders each language's "one" and "other" forms; a language with more forms says "other".
  const text = plurals.select(count) === "one" && element.dataset.one ? element.dataset.one : element.textContent;
  return filled(text, { ...values, count });
}

/** A number in the page's language's own form. */
export function number(value) {
  return numbers.format(value);
}

/** A kind of entity (a Home Assistant domain) in the page's language; "" for one the server did not name. */
export function kindWords(domain) {
  const template = document.getElementById("script-words");
  return template?.content.querySelector(`[data-kind="${CSS.escape(domain)}"]`)?.textContent ?? "";
}
