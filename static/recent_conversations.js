// The conversation page's list of recent conversations, kept live: reread from the server (newest last
// message first, as it orders them) and rebuilt from #recent-item-template with textContent. Without this
// module the list is as the server rendered it with the page, which every form post reloads.

import { api } from "./api.js";
import { localise } from "./clock.js";

const section = document.getElementById("recent-conversations");
const list = document.getElementById("recent-list");
const none = document.getElementById("recent-none");
const itemTemplate = document.getElementById("recent-item-template");

// How often an open, visible page rereads the list (a conversation answered in another tab moves up).
const REFRESH_MS = 15000;

let currentId = null;
let reading = null; // the read under way
let queued = null; // one more read, asked for while that one ran

/** One entry, cloned from the server's template: the link, when the household last wrote, whether a question waits. */
function entry(item) {
  const li = itemTemplate.content.firstElementChild.cloneNode(true);
  const link = li.querySelector('[data-slot="link"]');
  const url = new URL(section.dataset.pageUrl, window.location.href);
  url.searchParams.set("c", item.conversation_id);
  link.href = url.pathname + url.search;
  link.textContent = item.label;
  if (item.conversation_id === currentId) link.setAttribute("aria-current", "page");
  const updated = li.querySelector('[data-slot="updated"]');
  updated.dateTime = item.updated;
  updated.textContent = item.updated;
  localise(updated);
  if (!item.waiting) li.querySelector('[data-slot="waiting"]').remove();
  return li;
}

/** Read the list once and show it; whatever goes wrong, the next refresh can start. */
async function readOnce() {
  try {
    const result = await api("GET", section.dataset.recentUrl);
    if (!result.ok) return; // the list stays as it was; the next refresh tries again
    list.replaceChildren(...result.data.conversations.map(entry));
    list.hidden = result.data.conversations.length === 0;
    none.hidden = !list.hidden;
  } finally {
    reading = null;
  }
}

/** Reread the list now; `conversationId` is the one this page shows (marked as the current one). */
export function refreshRecent(conversationId = currentId) {
  currentId = conversationId;
  if (reading === null) {
    reading = readOnce();
    return reading;
  }
  // The read under way may have been answered before what this one is asked for (a message just answered):
  // one more read follows it, and every request meanwhile is folded into that one.
  queued ??= reading.finally(() => {
    queued = null;
    return refreshRecent();
  });
  return queued;
}

/** Keep the list live while the page is open: every little while when shown, and at once when shown again. */
export function keepRecentLive(conversationId) {
  currentId = conversationId;
  window.setInterval(() => {
    if (document.visibilityState === "visible") refreshRecent();
  }, REFRESH_MS);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refreshRecent();
  });
}
