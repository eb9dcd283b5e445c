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
let reading = null;

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

/** Reread the list now; `conversationId` is the one this page shows (marked as the current one). */
export function refreshRecent(conversationId = currentId) {
  currentId = conversationId;
  // One read at a time: a second asked for meanwhile is folded into the one under way.
  reading ??= api("GET", section.dataset.recentUrl).then((result) => {
    reading = null;
    if (!result.ok) return; // the list stays as it was; the next refresh tries again
    list.replaceChildren(...result.data.conversations.map(entry));
    list.hidden = result.data.conversations.length === 0;
    none.hidden = !list.hidden;
  });
  return reading;
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
