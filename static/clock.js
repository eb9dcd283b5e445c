// The household's clock: every <time data-clock> the server rendered (in UTC, worded in the Console's
// configured zone and the page's language) is rewritten in this browser's own zone, in the language
// <html lang> names (the household's, as the server chose it), in that language's own forms.
// Without this module the server's words stay.

/** The page's language as Intl takes it; the browser's own if Intl does not know it (a test's pseudo-language). */
export function pageLocale(root = document) {
  const lang = root.documentElement.lang;
  if (!lang) return undefined;
  return Intl.DateTimeFormat.supportedLocalesOf([lang]).length ? lang : undefined;
}

const locale = pageLocale();
const withDate = new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(locale, { timeStyle: "short" });

/** One <time data-clock="date|time" datetime="…Z"> worded in the browser's zone; left as it is if unreadable. */
export function localise(element) {
  const when = new Date(element.dateTime);
  if (Number.isNaN(when.getTime())) return;
  element.textContent = (element.dataset.clock === "time" ? timeOnly : withDate).format(when);
  // The exact moment and the zone it is shown in, for whoever hovers or asks.
  element.title = `${when.toISOString().replace(".000Z", "Z")} (${Intl.DateTimeFormat().resolvedOptions().timeZone})`;
}

/** Every clock element under `root` (the whole page by default). */
export function localiseAll(root = document) {
  for (const element of root.querySelectorAll("time[data-clock]")) localise(element);
}

localiseAll();
