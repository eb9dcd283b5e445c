// The confirmations page: keep the waiting cards current and answer them without reloading.
// The page works without this module (each card is a form post). Cards are built by cloning the
// server-rendered <template> and setting textContent: no HTML is assembled here.

const root = document.getElementById("confirmations");
const list = document.getElementById("confirmations-list");
const empty = document.getElementById("confirmations-empty");
const statusLine = document.getElementById("confirmations-status");
const template = document.getElementById("confirmation-template");
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const pollMs = Math.max(1, Number(root.dataset.pollSeconds) || 3) * 1000;

let shown = cardsOnPage();
let answering = false;

function cardsOnPage() {
  return [...list.querySelectorAll("[data-token]")].map((section) => section.dataset.token).join(" ");
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
  slot("destination").textContent = item.destination ?? `Asked by “${item.client}”.`;
  slot("expires").dateTime = item.expires_at;
  slot("expires").textContent = `${item.expires_at.slice(11, 16)} UTC`;
  slot("token").value = item.token;
  slot("approve").textContent = item.card.approve_label;
  slot("deny").textContent = item.card.deny_label;
  return fragment;
}

function render(pending) {
  const tokens = pending.map((item) => item.token).join(" ");
  updateBadge(pending.length);
  if (tokens === shown) return;
  const focusedToken = document.activeElement?.closest("[data-token]")?.dataset.token;
  const before = shown ? shown.split(" ").length : 0;
  shown = tokens;
  list.replaceChildren(...pending.map(cardFor));
  empty.hidden = pending.length > 0;
  if (pending.length > before) setStatus(`${pending.length} request${pending.length === 1 ? "" : "s"} waiting for you.`);
  // Keep focus on the card it was on, if that card is still there.
  if (focusedToken) list.querySelector(`[data-token="${CSS.escape(focusedToken)}"] button`)?.focus();
}

async function refresh() {
  if (answering) return;
  try {
    const response = await fetch(root.dataset.pendingUrl, { headers: { Accept: "application/json" } });
    if (response.status === 401) {
      window.location.assign(root.dataset.loginUrl);
      return;
    }
    if (!response.ok) return;
    render((await response.json()).pending);
  } catch {
    setStatus("The Console cannot be reached right now; this page will try again.");
  }
}

async function answer(form, approve) {
  const token = form.querySelector('input[name="token"]').value;
  answering = true;
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  try {
    const response = await fetch(root.dataset.answerUrl + encodeURIComponent(token), {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken, Accept: "application/json" },
      body: JSON.stringify({ approve }),
    });
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      setStatus(approve ? "Allowed: the program gets this read once." : "Not allowed: nothing was read.");
    } else {
      setStatus(body.error?.message ?? "That answer did not go through. Try again.");
    }
  } catch {
    setStatus("The Console cannot be reached right now. Try again.");
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
