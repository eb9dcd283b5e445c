// The settings page's status lines, and its errors in the words the server sends (console_ha/words.py).
// It keeps only the fallbacks for an answer without a body (static/api.js gives such an error only a code):
// the Console not answering at all, or answering with no JSON.

import { words } from "../words.js";

/** A status line's words and kind (busy, ok, error); the colour only repeats the words. */
export function setStatus(el, text, kind = "") {
  el.className = "status" + (kind ? ` status--${kind}` : "");
  el.textContent = text;
}

/** What went wrong, in the server's words. */
export function say(error) {
  if (error.message) return error.message;
  if (error.code === "NETWORK") return words("network");
  if (error.code.startsWith("HTTP_")) {
    return words("http-error", { status: error.code.slice("HTTP_".length) });
  }
  return words("went-wrong");
}

/**
 * An error in household words. A lost session shows the page's own words and a link to log in again
 * beside this page (the server-rendered #logged-out-template, which tells static/api.js to leave the
 * page where it is), so nothing typed is lost.
 */
export function showError(el, error, after = "") {
  const loggedOut = document.getElementById("logged-out-template");
  if (error.code === "UNAUTHENTICATED" && loggedOut) {
    const sentence = loggedOut.content.cloneNode(true);
    sentence.querySelector("[data-slot=words]").append(after);
    setStatus(el, "", "error");
    el.append(sentence);
    return;
  }
  setStatus(el, say(error) + after, "error");
}
