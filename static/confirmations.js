// The confirmations page: keep the waiting cards current and answer them without reloading.
// The page works without this module (each card is a form post). Cards are built by cloning the
// server-rendered <template> and setting textContent: no HTML is assembled here.

import { api } from "./api.js";
import { localise } from "./clock.js";

const root = document.getElementById("confirmations");
const list = document.getElementById("confirmations-list");
const empty = document.getElementById("confirmations-empty");
const statusLine = document.getElementById("confirmations-status");
const template = document.getElementById("confirmation-template");
const pollMs = Math.max(1, Number(root.dataset.pollSeconds) || 3) * 1000;
// The page's own words, in its language, from the server (data-words-*): this script holds none.
const words = root.dataset;
const lang = document.documentElement.lang || "en";

let shown = cardsOnPage();
let answering = false;

// What the page shows of each card that can change while it waits: which card, and how often it was asked.
function cardKey(token, askedWords) {
  return `${token}:${askedWords ?? ""}`;
}

function cardsOnPage() {
  return [...list.querySelectorAll("[data-token]")]
    .map((section) => cardKey(section.dataset.token, section.querySelector('[data-slot="asked"]')?.textContent))
    .join(" ");
}

/** "3 requests waiting for you.": the server's sentence for the number's plural form, the number in the page's language. */
function arrivedWords(count) {
  const form = new Intl.PluralRules(lang).select(count) === "one" ? words.wordsArrivedOne : words.wordsArrivedOther;
  return form.replace("{count}", new Intl.NumberFormat(lang).format(count));
}

function setStatus(text) {
  statusLine.textContent = text;
}

function updateBadge(count) {
  const badge = document.getElementById("waiting-count");
  if (!badge) return;
  badge.hidden = count === 0;
  badge.querySelector("[data-slot=count]").textContent = String(count);
}

function cardFor(item, index) {
  const fragment = template.content.cloneNode(true);
  const section = fragment.querySelector("section");
  const slot = (name) => fragment.querySelector(`[data-slot="${name}"]`);
  section.dataset.token = item.token;
  const titleId = `title-live-${index}`;
  slot("title").id = titleId;
  section.setAttribute("aria-labelledby", titleId);
  slot("title").textContent = item.card.title;
  slot("body").textContent = item.card.body;
  slot("destination").textContent = item.destination ?? "";
  // The server's sentence ("Asked 3 times."), once the program asked again; else the line stays hidden.
  slot("asked").textContent = item.asked_words ?? "";
  slot("asked").hidden = !item.asked_words;
  slot("expires").dateTime = item.expires_at;
  localise(slot("expires"));
  slot("token").value = item.token;
  slot("approve").textContent = item.card.approve_label;
  slot("deny").textContent = item.card.deny_label;
  return fragment;
}

function render(pending) {
  const keys = pending.map((item) => cardKey(item.token, item.asked_words)).join(" ");
  updateBadge(pending.length);
  if (keys === shown) return;
  const focusedToken = document.activeElement?.closest("[data-token]")?.dataset.token;
  const before = list.querySelectorAll("[data-token]").length;
  shown = keys;
  list.replaceChildren(...pending.map(cardFor));
  empty.hidden = pending.length > 0;
  if (pending.length > before) setStatus(arrivedWords(pending.length));
  // Keep focus on the card it was on, if that card is still there.
  if (focusedToken) list.querySelector(`[data-token="${CSS.escape(focusedToken)}"] button`)?.focus();
}

async function refresh() {
  if (answering) return;
  const result = await api("GET", root.dataset.pendingUrl); // a 401 goes to the login page (api.js)
  if (result.ok) render(result.data.pending);
  else if (result.error.code === "NETWORK") setStatus(words.wordsUnreachable);
}

async function answer(form, approve) {
  const token = form.querySelector('input[name="token"]').value;
  answering = true;
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    const result = await api("POST", root.dataset.answerUrl + encodeURIComponent(token), { approve });
    if (result.ok) {
      setStatus(result.data.message); // the server says what happens now (read now, or at the program's next call)
    } else if (result.error.code === "NETWORK") {
      setStatus(words.wordsUnreachableAnswer);
    } else {
      setStatus(result.error.message ?? words.wordsNotThrough);
    }
  } finally {
    answering = false;
    await refresh();
    for (const button of form.querySelectorAll("button")) button.disabled = false;
  }
}

list.addEventListener("submit", (event) => {
  event.preventDefault();
  const approve = event.submitter?.value === "approve";
  answer(event.target, approve);
});

window.setInterval(refresh, pollMs);
// The nav's long poll (nav.js) hears of a change first: show it now rather than at the next round.
document.addEventListener("console-ha:waiting", () => refresh());
