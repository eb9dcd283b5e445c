// The household's clock: every <time data-clock> the server rendered (in UTC, worded in the Console's
// configured zone) is rewritten in this browser's own zone. Without this module the server's words stay.

const withDate = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });

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
