// The settings page's one way to the Console's JSON API, and its status lines.
// Failures are shown in the words the server sends (console_ha/words.py); this module keeps only the
// fallbacks for an answer without a body: the Console not answering at all, or answering with no JSON.

const NETWORK_WORDS =
  "The Console didn’t answer. Check that it is still running, then try again; your choices are " +
  "still on this page.";

/** A status line's words and kind (busy, ok, error); the colour only repeats the words. */
export function setStatus(el, text, kind = "") {
  el.className = "status" + (kind ? ` status--${kind}` : "");
  el.textContent = text;
}

/** What went wrong, in the server's words. */
export function say(error) {
  return error.message || "Something went wrong. Please try again.";
}

/**
 * An error in household words. A lost session shows the page's own words and a link to log in again
 * beside this page (the server-rendered #logged-out-template), so nothing typed is lost.
 */
export function showError(el, error, after = "") {
  const loggedOut = document.getElementById("logged-out-template");
  if (error.code === "UNAUTHENTICATED" && loggedOut) {
    const words = loggedOut.content.cloneNode(true);
    words.querySelector("[data-slot=words]").append(after);
    setStatus(el, "", "error");
    el.append(words);
    return;
  }
  setStatus(el, say(error) + after, "error");
}

/**
 * A fresh CSRF token after the session changed under the page (a login in another tab starts a new
 * session, and with it a new token): read it from this same page, fetched anew, so nothing typed is lost.
 */
async function refreshCsrf() {
  try {
    const response = await fetch(location.pathname, { credentials: "same-origin" });
    if (!response.ok) return false;
    const html = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = html.querySelector('meta[name="csrf-token"]');
    const meta = document.querySelector('meta[name="csrf-token"]');
    if (!fresh || !meta) return false;
    meta.content = fresh.content;
    return true;
  } catch {
    return false;
  }
}

/** One fetch wrapper: JSON in and out, CSRF header from the meta tag, errors in the contract's shape. */
export async function api(method, url, body, retried = false) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET") {
    const meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) headers["X-CSRFToken"] = meta.content;
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    return { ok: false, status: 0, error: { code: "NETWORK", message: NETWORK_WORDS } };
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (response.ok && data) return { ok: true, status: response.status, data };
  if (data && data.error && data.error.code === "CSRF_INVALID" && !retried && (await refreshCsrf())) {
    return api(method, url, body, true);
  }
  const error = (data && data.error) || {
    code: response.status === 401 ? "UNAUTHENTICATED" : "HTTP_" + response.status,
    message: `The Console answered with an error (${response.status}). Please try again.`,
  };
  return { ok: false, status: response.status, error };
}
