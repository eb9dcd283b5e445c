// Every page script's one way to the Console's JSON API (docs/front-end.md): JSON in and out, the CSRF
// header, a fresh CSRF token after a login elsewhere, errors in the contract's shape, and one reaction to
// a 401. It holds no household words: an error carries the server's `message`, and an answer without a
// body (the Console did not answer, or not in JSON) carries only a code, for the page to say in its words.

/**
 * A fresh CSRF token after the session changed under the page (a login in another tab starts a new
 * session, and with it a new token): read it from this same page, fetched anew, so nothing typed is lost.
 */
async function refreshCsrf() {
  try {
    const response = await fetch(location.href, { credentials: "same-origin" });
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

// True once a form on this page was submitted and no script stopped it: the browser is leaving the page.
// A listener on the document runs after the form's own, so `defaultPrevented` is already settled.
let leaving = false;
document.addEventListener("submit", (event) => {
  if (!event.defaultPrevented) leaving = true;
});
addEventListener("pageshow", () => {
  leaving = false; // back from the browser's cache: the page is here again
});

/**
 * The one reaction to a 401: the session ended, so the household logs in again and comes back to this
 * page. Most pages go to the login page at once, with `next` set to this page (the login URL is on
 * <body>, base.html), and the caller's await never settles, since the page is leaving. A page with
 * unsaved work that leaving would lose renders its own words for this instead (#logged-out-template:
 * log in again in a new tab, then try again here): there the error is returned, for the page to show.
 */
function sessionEnded(result) {
  if (document.getElementById("logged-out-template")) return result;
  // A form this page sent is already taking it somewhere (Log out above all: its 302 lands on "You are
  // logged out"). A long poll that the same logout answered with 401 must not race it to another page.
  if (leaving) return new Promise(() => {});
  const next = encodeURIComponent(location.pathname + location.search);
  location.assign(`${document.body.dataset.loginUrl}?next=${next}`);
  return new Promise(() => {});
}

/**
 * `method` `url`, with `body` as JSON if given. Resolves to `{ ok: true, status, data, headers }` or
 * `{ ok: false, status, error, headers }`, where `error` is the server's (`code`, `message`, details) or,
 * without one, `{ code: "NETWORK" }` (status 0) or `{ code: "HTTP_<status>" }`. Never rejects.
 */
export async function api(method, url, body = undefined, retried = false) {
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
    return { ok: false, status: 0, error: { code: "NETWORK" }, headers: new Headers() };
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  const { status } = response;
  if (response.ok && data) return { ok: true, status, data, headers: response.headers };
  if (data && data.error && data.error.code === "CSRF_INVALID" && !retried && (await refreshCsrf())) {
    return api(method, url, body, true);
  }
  const error = (data && data.error) || { code: status === 401 ? "UNAUTHENTICATED" : `HTTP_${status}` };
  const result = { ok: false, status, error, headers: response.headers };
  return status === 401 ? sessionEnded(result) : result;
}

/**
 * A last word to the server from a page that is going (`pagehide`): `fields` form-encoded with the CSRF
 * token, sent with `navigator.sendBeacon`, which the browser delivers after the page is gone. No answer
 * comes back to anyone; false when the browser has no beacons or would not queue this one.
 */
export function beacon(url, fields) {
  if (!("sendBeacon" in navigator)) return false;
  const body = new URLSearchParams(fields);
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) body.set("csrf_token", meta.content);
  return navigator.sendBeacon(url, body);
}
