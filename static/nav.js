// Every Console page: the count of requests waiting on the Confirmations page, in the nav and the title,
// and a system notification for each new one once the household has allowed notifications (the button on
// /confirmations). One long poll per page: the server answers as soon as the waiting cards change, or
// after about 25 s with nothing new (capabilities/household_watch.py). Without this module the count is
// the one the page was rendered with. The notification's words come from the server.

import { api } from "./api.js";

const badge = document.getElementById("waiting-count");
const RETRY_AFTER_FAILURE_MS = 5000;
const baseTitle = document.title.replace(/^\(\d+\) /, "");

let version = badge?.dataset.version ?? "";
let known = new Set((badge?.dataset.cards ?? "").split(" ").filter(Boolean));

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
    // The tag is the card's: several open pages show one notification per card, not one each.
    const notification = new Notification(card.notification_title, { body: card.notification_body, tag: card.id });
    notification.addEventListener("click", () => {
      window.focus();
      badge.closest("a").click(); // the nav's Confirmations link, which holds the count
    });
  } catch {
    // A browser that allows notifications only from a service worker (Chrome on Android): the count still shows.
  }
}

function received(answer) {
  version = answer.version;
  const now = new Set(answer.cards.map((card) => card.id));
  for (const card of answer.cards) if (!known.has(card.id)) notify(card);
  known = now;
  showCount(answer.count);
}

const pause = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

async function watch() {
  for (;;) {
    const result = await api("GET", `${badge.dataset.watchUrl}?seen=${encodeURIComponent(version)}`);
    if (result.ok) {
      received(result.data);
      // Turned away (too many pages open at once): ask again later; the count still comes, later.
      if (result.data.busy) await pause(result.data.retry_after * 1000);
    } else if (result.error.code === "UNAUTHENTICATED") {
      return; // a page that keeps unsaved work stays (api.js); nothing more to watch without a session
    } else {
      await pause(RETRY_AFTER_FAILURE_MS); // offline for a moment, or a restart: try again
    }
  }
}

if (badge?.dataset.watchUrl) watch();
