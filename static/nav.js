// Every Console page: the count of requests waiting on the Confirmations page, in the nav and the title,
// and a system notification for each new one once the household has allowed notifications (the button on
// /confirmations). Without this module the count is the one the page was rendered with. The
// notification's words come from the server.
//
// One long poll for all of this browser's open Console pages (docs/front-end.md, "The waiting count"):
// the page holding the Web Lock `console-ha-watch` asks the server, which answers as soon as the waiting
// cards change, or after about 25 s with nothing new (answers/page_watch.py), and it shares each
// answer with the other pages over a BroadcastChannel. When it goes, the browser hands the lock to the next
// page at once, which asks from the version it last heard. Where Web Locks are missing (a Console on plain
// http from another machine is not a secure context), every page asks for itself, as before, and still
// shares what it hears, so a page the server turned away as busy learns of a card from the others.
//
// A page's question names its tab (an id kept in sessionStorage across the tab's pages) and its load; a
// newer question of the tab replaces the older on the server, and a page that goes ends its question with a
// beacon on `pagehide`, so moving through pages never leaves questions behind that count against the tabs.

import { api, beacon } from "./api.js";

const badge = document.getElementById("waiting-count");
const RETRY_AFTER_FAILURE_MS = 5000;
const LEADER_LOCK = "console-ha-watch";
const CHANNEL = "console-ha-waiting";
const TAB_KEY = "console-ha-watch-tab";
const baseTitle = document.title.replace(/^\(\d+\) /, "");

let version = badge?.dataset.version ?? "";
let known = new Set((badge?.dataset.cards ?? "").split(" ").filter(Boolean));
let asking = false; // whether this page has a question open on the server (then it says when it goes)

function randomId() {
  // getRandomValues, not randomUUID: it also exists outside a secure context (plain http on the LAN).
  return Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function tabId(fresh = false) {
  try {
    let id = fresh ? "" : sessionStorage.getItem(TAB_KEY);
    if (!id) {
      id = randomId();
      sessionStorage.setItem(TAB_KEY, id);
    }
    return id;
  } catch {
    return randomId(); // storage refused: this page is a tab of its own
  }
}

const ids = { page: tabId(), load: randomId() };

function showCount(count) {
  badge.hidden = count === 0;
  badge.querySelector("[data-slot=count]").textContent = String(count);
  document.title = count > 0 ? `(${count}) ${baseTitle}` : baseTitle;
  // The confirmations page keeps its list with its own poll; it listens for this to refresh at once.
  document.dispatchEvent(new CustomEvent("console-ha:waiting", { detail: { count } }));
}

function notify(card) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  try {
    // The tag is the card's: pages that each ask for themselves show one notification per card, not one each.
    const notification = new Notification(card.notification_title, { body: card.notification_body, tag: card.id });
    notification.addEventListener("click", () => {
      window.focus();
      badge.closest("a").click(); // the nav's Confirmations link, which holds the count
    });
  } catch {
    // A browser that allows notifications only from a service worker (Chrome on Android): the count still shows.
  }
}

/** An answer, from the server (`asked`: this page notifies) or from the page that asked for all. */
function received(answer, asked) {
  version = answer.version;
  const now = new Set(answer.cards.map((card) => card.id));
  if (asked) for (const card of answer.cards) if (!known.has(card.id)) notify(card);
  known = now;
  showCount(answer.count);
}

// A page that starts says HELLO, and a page that asks the server answers with the last answer it had: an
// answer shared between this page's render and its script's start was sent before it listened, and the next
// one may be 25 s away.
const HELLO = "hello";
let latest = null; // this page's last answer from the server, while it asks

const channel = "BroadcastChannel" in window ? new BroadcastChannel(CHANNEL) : null;
channel?.addEventListener("message", (event) => {
  if (event.data !== HELLO) received(event.data, false);
  else if (latest) channel.postMessage(latest);
});

const pause = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

async function ask() {
  const query = new URLSearchParams({ seen: version, page: ids.page, load: ids.load });
  asking = true;
  try {
    return await api("GET", `${badge.dataset.watchUrl}?${query}`);
  } finally {
    asking = false;
  }
}

/** Ask, answer after answer, until the session ends; resolving gives up the lock. */
async function watch() {
  for (;;) {
    const result = await ask();
    if (result.ok) {
      latest = result.data;
      // Replaced by a newer question with this tab's id: another tab has it too (a duplicated tab), so this
      // page takes an id of its own rather than the two replacing each other for ever.
      if (result.data.replaced) ids.page = tabId(true);
      received(result.data, true);
      channel?.postMessage(result.data);
      // Turned away (too many pages open at once): ask again later; the others' answers still come.
      if (result.data.busy) await pause(result.data.retry_after * 1000);
    } else if (result.error.code === "UNAUTHENTICATED") {
      latest = null; // what it last heard is no answer for a page that starts now
      return; // a page that keeps unsaved work stays (api.js); nothing more to watch without a session
    } else {
      await pause(RETRY_AFTER_FAILURE_MS); // offline for a moment, or a restart: try again
    }
  }
}

if (badge?.dataset.watchUrl) {
  window.addEventListener("pagehide", () => {
    if (asking) beacon(badge.dataset.leaveUrl, { page: ids.page, load: ids.load });
  });
  if (channel && navigator.locks) navigator.locks.request(LEADER_LOCK, () => watch());
  else watch();
  channel?.postMessage(HELLO);
}
