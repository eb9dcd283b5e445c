// The connection: the stored token's status, the Home Assistant it belongs to, and Test connection.

import { api } from "../api.js";
import { setStatus, showError } from "./status.js";
import { words } from "../words.js";

/** scheme://host:port with the port written out, as the server's ha.addresses.origin_of; "" if not a URL. */
export function originOf(text) {
  let url;
  try {
    url = new URL(text.trim());
  } catch {
    return "";
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || !url.hostname) return "";
  return `${url.protocol}//${url.hostname}:${url.port || (url.protocol === "https:" ? "443" : "80")}`;
}

/** Field errors beside the URL and token fields, and the token's status; `page` is the shared state. */
export function setUpConnection(page) {
  const { el, $ } = page;
  const fieldInputs = { base_url: el.url, access_token: el.token };

  page.clearFieldErrors = () => {
    for (const input of Object.values(fieldInputs)) {
      input.removeAttribute("aria-invalid");
      const msg = $(`${input.id}-error`);
      if (msg) {
        msg.hidden = true;
        msg.textContent = "";
      }
    }
  };

  page.showFieldError = (error) => {
    const input = fieldInputs[error.field];
    if (!input) return false;
    const msg = $(`${input.id}-error`);
    input.setAttribute("aria-invalid", "true");
    if (msg) {
      // The field's own words when the message is the household's sentence for the status line (words.py).
      msg.textContent = error.field_message || error.message;
      msg.hidden = false;
      const described = (input.getAttribute("aria-describedby") || "").split(" ");
      if (!described.includes(msg.id)) {
        input.setAttribute("aria-describedby", [...described, msg.id].join(" ").trim());
      }
    }
    input.focus();
    return true;
  };

  // ---------- token status ----------

  function describeToken(stored, elsewhere = false) {
    // The server's words for each case, in the page's language (data-none, data-elsewhere, data-kept).
    const said = el.tokenStatus.dataset;
    el.tokenStatus.textContent = !stored ? said.none : elsewhere ? said.elsewhere : said.kept;
  }

  page.showTokenStored = (stored) => {
    el.tokenStatus.dataset.stored = String(stored);
    describeToken(stored);
    el.removeRow.hidden = !stored;
    el.remove.checked = false;
  };

  // ---------- the stored token belongs to its Home Assistant ----------

  // The server never sends the stored token to another origin (it refuses); this says so before Save or
  // Test connection is pressed, in the server's words rendered into the page.
  const originNote = page.originNote;

  page.showTokenOrigin = () => {
    const stored = el.tokenStatus.dataset.stored === "true";
    const saved = originNote.el.dataset.tokenOrigin || "";
    const typed = originOf(el.url.value);
    originNote.saved.textContent = saved;
    originNote.typed.textContent = typed;
    originNote.other.hidden = saved === "";
    originNote.unbound.hidden = saved !== "";
    const elsewhere = stored && typed !== "" && typed !== saved;
    describeToken(stored, elsewhere);
    // A token typed into the field is the one that will be used: the note is then beside the point.
    originNote.el.hidden = !(elsewhere && el.token.value.trim() === "");
  };

  el.url.addEventListener("input", page.showTokenOrigin);
  el.token.addEventListener("input", page.showTokenOrigin);

  // The URL and token as typed: a test counts for these only, and typing anything else undoes it.
  page.connectionKey = () => `${originOf(el.url.value)}\n${el.url.value.trim()}\n${el.token.value.trim()}`;

  // ---------- test connection ----------

  // A submit button, for the page without JavaScript; here the test runs in place and nothing is posted.
  el.test.addEventListener("click", async (event) => {
    event.preventDefault();
    page.clearFieldErrors();
    const body = {};
    if (el.url.value.trim()) body.base_url = el.url.value.trim();
    if (el.token.value.trim()) body.access_token = el.token.value.trim();
    const key = page.connectionKey(); // what is tested: typing during the test makes it another
    el.test.setAttribute("aria-disabled", "true");
    setStatus(el.testStatus, words("asking"), "busy");
    const result = await api("POST", page.urls.test, body);
    el.test.removeAttribute("aria-disabled");
    if (result.ok) {
      const { location_name: name, version } = result.data;
      const connected = name ? words("connected-named", { name, version }) : words("connected", { version });
      setStatus(el.testStatus, page.dirty ? `${connected} ${words("choose-then-save")}` : connected, "ok");
      page.testedWith = key;
      page.showSteps();
      // The picker from what was just tested, before anything is saved: the same URL and token, so the
      // typed token goes only where the test sent it (the server applies the same rule).
      page.loadEntities(body);
    } else {
      if (result.error.field) page.showFieldError(result.error);
      showError(el.testStatus, result.error);
      if (result.error.code === "HA_TLS_ERROR") page.openCa();
    }
  });
}
