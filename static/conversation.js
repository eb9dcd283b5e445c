// The conversation page: send messages, show the assistant's answers, and ask before every read.
// The page works without this module (plain form posts); this makes it live and keeps focus sensible.

import { api } from "./api.js";
import { localise } from "./clock.js";
import { keepRecentLive, refreshRecent } from "./recent_conversations.js";

const root = document.getElementById("conversation");
const transcript = document.getElementById("transcript");
const cardSlot = document.getElementById("card-slot");
const statusLine = document.getElementById("conversation-status");
const messageForm = document.getElementById("message-form");
const messageField = document.getElementById("message");
const sendButton = document.getElementById("send");
const cardTemplate = document.getElementById("confirm-card-template");
const messageUrl = root.dataset.messageUrl;
const linesUrl = root.dataset.linesUrl;
const modelHelp = document.getElementById("model-help");
// The page's own words, in its language, from the server (data-words-*): this script holds none.
const words = root.dataset;

let conversationId = root.dataset.conversationId || null;
let lastQuestion = root.dataset.lastQuestion || "";
let busy = false;
let expiryTimer = null;
// Server time minus this browser's time, from each answer's Date header: cards expire by the server's clock.
let clockSkewMs = 0;

function setStatus(text, kind = "") {
  statusLine.textContent = text;
  statusLine.className = kind ? `status status--${kind}` : "status";
}

function setBusy(value) {
  busy = value;
  sendButton.disabled = value;
  for (const button of cardSlot.querySelectorAll("button")) button.disabled = value;
  if (value) setStatus(words.wordsWaiting, "busy");
}

function rememberConversation(id) {
  conversationId = id;
  for (const input of root.querySelectorAll('input[name="conversation_id"]')) input.value = id;
  // A reload shows the same conversation, rendered by the server.
  const url = new URL(window.location.href);
  url.searchParams.set("c", id);
  window.history.replaceState(null, "", url);
}

/** One transcript line, cloned from the server-rendered #message-template-<role>. */
function addMessage(role, text) {
  const item = document.getElementById(`message-template-${role}`).content.firstElementChild.cloneNode(true);
  item.querySelector(".msg__text").textContent = text;
  transcript.append(item);
  item.scrollIntoView({ block: "nearest" });
  return item;
}

/** The transcript as the server keeps it (the Console's own lines among the rest); null if it could not be read. */
async function refreshLines() {
  const url = new URL(linesUrl, window.location.href);
  url.searchParams.set("conversation_id", conversationId);
  const result = await api("GET", url.pathname + url.search);
  if (!result.ok) return null;
  transcript.replaceChildren();
  for (const line of result.data.messages) addMessage(line.role, line.content);
  return result.data;
}

// How often, and how many times, the page rereads the conversation after its card expired, until the
// server has closed the card too (the card's expires_at is to the second, the server's deadline is not).
const EXPIRY_RETRY_MS = 1000;
const EXPIRY_TRIES = 10;

/** After card `token` expired: the Console's own line for it, once the server has recorded the expiry. */
async function showExpiryLine(token, tries = EXPIRY_TRIES) {
  // Another message or card since then brings its own lines.
  if (!conversationId || busy || document.getElementById("confirm-card")?.dataset.token !== token) return;
  const data = await refreshLines();
  if (data && data.pending_confirmation?.token !== token) {
    refreshRecent(); // no question waits any more
    return;
  }
  if (tries > 1) window.setTimeout(() => showExpiryLine(token, tries - 1), EXPIRY_RETRY_MS);
}

function clearCard() {
  window.clearTimeout(expiryTimer);
  cardSlot.replaceChildren();
}

/** The card, cloned from the server-rendered #confirm-card-template (the markup the server's own card has). */
function showCard(pending) {
  clearCard();
  const fragment = cardTemplate.content.cloneNode(true);
  const card = fragment.querySelector("section");
  const slot = (name) => fragment.querySelector(`[data-slot="${name}"]`);
  card.id = "confirm-card";
  card.tabIndex = -1;
  card.setAttribute("aria-labelledby", "confirm-title");
  card.setAttribute("aria-describedby", "confirm-body");
  card.dataset.token = pending.token;
  card.dataset.expiresAt = pending.expires_at;
  slot("title").id = "confirm-title";
  slot("title").textContent = pending.card.title;
  slot("body").id = "confirm-body";
  slot("body").textContent = pending.card.body;
  slot("expires").dateTime = pending.expires_at;
  localise(slot("expires"));
  slot("token").value = pending.token;
  slot("approve").textContent = pending.card.approve_label;
  slot("deny").textContent = pending.card.deny_label;
  for (const input of fragment.querySelectorAll('input[name="conversation_id"]')) input.value = conversationId;
  // Answered through the page's submit handler below, like a card the server rendered.
  cardSlot.append(fragment);
  // Focus moves to the card so a keyboard or screen-reader user meets the question at once.
  card.focus();
  const remaining = Date.parse(pending.expires_at) - (Date.now() + clockSkewMs);
  expiryTimer = window.setTimeout(expireCard, Math.max(0, remaining));
}

/** The card's time has come: it says so at once, and the chat gets the Console's line for it. */
function expireCard() {
  showExpired();
  showExpiryLine(document.getElementById("confirm-card")?.dataset.token);
}

/** The card's question replaced by why it closed, and the question to ask again (#expired-template). */
function showExpired(message = null) {
  const card = document.getElementById("confirm-card");
  if (!card) return;
  window.clearTimeout(expiryTimer);
  card.classList.add("confirm-card--expired");
  const fragment = document.getElementById("expired-template").content.cloneNode(true);
  const note = fragment.querySelector(".confirm-card__expired");
  if (message) note.textContent = message; // else the template's own words: it expired
  fragment.querySelector('input[name="message"]').value = lastQuestion;
  fragment.querySelector('input[name="conversation_id"]').value = conversationId ?? "";
  if (!lastQuestion) fragment.querySelector("button").remove();
  const actions = fragment.querySelector(".actions");
  for (const old of card.querySelectorAll(".actions, form, .hint, .confirm-card__expired")) old.remove();
  card.append(fragment);
  actions.querySelector("button")?.focus();
}

async function post(body) {
  setBusy(true);
  const result = await api("POST", messageUrl, body); // a 401 goes to the login page (api.js)
  setBusy(false);
  if (result.error?.code === "NETWORK") {
    setStatus(words.wordsUnreachable, "error");
    return null;
  }
  const serverDate = Date.parse(result.headers.get("Date") ?? "");
  if (!Number.isNaN(serverDate)) clockSkewMs = serverDate - Date.now();
  if (!result.ok) {
    const error = result.error.message ? result.error : { code: "INTERNAL_ERROR", message: words.wordsFailed };
    return { error };
  }
  return { data: result.data };
}

async function showTurn(data) {
  rememberConversation(data.conversation_id);
  refreshRecent(data.conversation_id); // the answered conversation moves up, and says whether a question waits
  // The Console's own lines (refused, denied, withdrawn, failed) come with the transcript; the reply alone
  // is shown if it cannot be read.
  const shown = await refreshLines();
  if (shown === null && data.reply !== null && data.reply !== undefined) addMessage("assistant", data.reply);
  if (data.pending_confirmation) {
    setStatus(words.wordsAsks);
    showCard(data.pending_confirmation);
  } else {
    clearCard();
    setStatus("");
    messageField.focus();
  }
}

async function sendMessage(text) {
  if (busy) return;
  const question = text.trim();
  if (!question) {
    setStatus(words.wordsEmpty, "error");
    messageField.focus();
    return;
  }
  clearCard();
  lastQuestion = question;
  const shown = addMessage("user", question);
  messageField.value = "";
  const body = conversationId ? { conversation_id: conversationId, message: question } : { message: question };
  const outcome = await post(body);
  if (!outcome) {
    shown.remove();
    messageField.value = question;
    return;
  }
  if (outcome.error) {
    // The Console forgot the failed attempt; the question goes back in the field to send again.
    shown.remove();
    messageField.value = question;
    setStatus(outcome.error.message, "error");
    modelHelp.hidden = !outcome.error.code?.startsWith("MODEL_");
    messageField.focus();
    return;
  }
  modelHelp.hidden = true;
  await showTurn(outcome.data);
}

async function answerCard(pending, approve) {
  if (busy) return;
  window.clearTimeout(expiryTimer);
  const outcome = await post({ conversation_id: conversationId, confirmation: { token: pending.token, approve } });
  if (!outcome) return;
  if (outcome.error) {
    refreshRecent(); // the question no longer waits, whatever closed it
    if (outcome.error.code === "CONFIRMATION_INVALID") {
      showExpired(outcome.error.reason === "expired" ? null : words.wordsNotOpen);
      setStatus("");
      if (outcome.error.reason === "expired") showExpiryLine(pending.token);
    } else {
      setStatus(outcome.error.message, "error");
      clearCard();
      messageField.focus();
    }
    return;
  }
  await showTurn(outcome.data);
}

// The server-rendered forms (message, card, "ask again") become requests from this page.
root.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  event.preventDefault();
  const fields = new FormData(form);
  const token = fields.get("token");
  if (token) {
    const approve = event.submitter?.value === "approve";
    const title = document.getElementById("confirm-title")?.textContent ?? "";
    answerCard({ token, card: { title } }, approve);
  } else {
    sendMessage(String(fields.get("message") ?? (form === messageForm ? messageField.value : "")));
  }
});

// Enter sends only through this handler, so only this script tells the household so.
const enterHint = document.getElementById("enter-hint");
enterHint.hidden = false;
messageField.setAttribute("aria-describedby", `${messageField.getAttribute("aria-describedby")} ${enterHint.id}`);

messageField.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    messageForm.requestSubmit();
  }
});

// A card the server rendered (after a reload) keeps its expiry.
const renderedCard = document.getElementById("confirm-card");
if (renderedCard && !renderedCard.classList.contains("confirm-card--expired")) {
  const remaining = Date.parse(renderedCard.dataset.expiresAt) - Date.now();
  expiryTimer = window.setTimeout(expireCard, Math.max(0, remaining));
}

keepRecentLive(conversationId);
