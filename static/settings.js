// The Home Assistant settings page, enhanced: discovery, test connection, the live entity picker
// and saving through the JSON API. The page works without this file; this makes it pleasant.

const NO_AREA = "No area";

// Failures in household words, by the contract's error codes.
const WORDS = {
  HA_UNAUTHORIZED:
    "Home Assistant refused the access token. Check that it was copied completely, or create a new " +
    "one in Home Assistant (your profile, then Security, then Long-lived access tokens).",
  HA_UNREACHABLE:
    "Couldn’t reach Home Assistant at that address. Check the URL, and that Home Assistant is " +
    "switched on and on the same network as this Console.",
  HA_TIMEOUT:
    "Home Assistant took too long to answer. It may be starting up or busy; try again in a minute.",
  HA_TLS_ERROR:
    "The secure (https) connection failed because this Console doesn’t trust Home Assistant’s " +
    "certificate. Add its CA certificate under “Home Assistant on https with its own certificate” " +
    "below, or try the http:// address you use at home.",
  HA_NOT_FOUND:
    "Something answered at that address, but it isn’t Home Assistant. Check the URL; it usually " +
    "ends in :8123.",
  HA_BAD_RESPONSE:
    "Something answered at that address, but it doesn’t look like Home Assistant. Check the URL; " +
    "it usually ends in :8123.",
  CAPABILITY_NOT_CONFIGURED:
    "Enter the Home Assistant URL and an access token, then press Test connection, to choose entities.",
  UNAUTHENTICATED:
    "You have been logged out. Log in again in another tab, then try again here; your choices are " +
    "still on this page.",
  NETWORK:
    "The Console didn’t answer. Check that it is still running, then try again; your choices are " +
    "still on this page.",
};

function say(error) {
  return WORDS[error.code] || error.message || "Something went wrong. Please try again.";
}

const collator = new Intl.Collator(undefined, { sensitivity: "base", numeric: true });
const number = new Intl.NumberFormat();

function esc(text) {
  return String(text)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

function setStatus(el, text, kind = "") {
  el.className = "status" + (kind ? ` status--${kind}` : "");
  el.textContent = text;
}

/** An error in household words; a lost session also gets a link to log in again beside this page. */
function showError(el, error, after = "") {
  setStatus(el, say(error) + after, "error");
  const login = document.getElementById("ha-settings").dataset.loginUrl;
  if (error.code === "UNAUTHENTICATED" && login) {
    const link = document.createElement("a");
    link.href = login;
    link.target = "_blank";
    link.rel = "noopener";
    link.textContent = "Log in again (opens a new tab)";
    el.append(" ", link);
  }
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
async function api(method, url, body, retried = false) {
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
    return { ok: false, status: 0, error: { code: "NETWORK" } };
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

function init(form) {
  const $ = (id) => document.getElementById(id);
  const urls = {
    config: form.dataset.configUrl,
    entities: form.dataset.entitiesUrl,
    discover: form.dataset.discoverUrl,
    test: form.dataset.testUrl,
    preview: form.dataset.previewUrl,
  };
  // The server's maximum allowlist (console_ha.config_store.MAX_ALLOWLIST), from the page.
  const LIMIT = Number(form.dataset.allowlistLimit) || Infinity;
  // Entity ids sent as reviewed with a save, at most (console_ha.review.MAX_SENT_BY_PAGE), from the page.
  const REVIEW_MAX = Number(form.dataset.reviewLimit) || 0;
  const el = {
    revision: $("revision"),
    enabled: $("enabled"),
    url: $("base-url"),
    token: $("access-token"),
    tokenStatus: $("token-status"),
    removeRow: $("remove-token-row"),
    remove: $("remove-token"),
    test: $("test-connection"),
    testStatus: $("test-status"),
    discovery: $("discovery"),
    discoveryStatus: $("discovery-status"),
    discoveryList: $("discovery-list"),
    discoverAgain: $("discover-again"),
    picker: $("picker"),
    pickerStatus: $("picker-status"),
    pickerRetry: $("picker-retry"),
    fallback: $("allowlist-fallback"),
    search: $("entity-search"),
    domain: $("domain-filter"),
    onlySelected: $("only-selected"),
    count: $("picker-count"),
    selectShown: $("select-shown"),
    clearShown: $("clear-shown"),
    bulkStatus: $("bulk-status"),
    groups: $("entity-groups"),
    empty: $("picker-empty"),
    save: $("save"),
    saveStatus: $("save-status"),
    saveAnyway: $("save-anyway"),
    dialog: $("sensitive-dialog"),
    steps: $("setup-steps"),
    onlyNew: $("only-new"),
    onlyNewRow: $("only-new-row"),
    newNotice: $("new-notice"),
    newNoticeText: $("new-notice-text"),
    missingNotice: $("missing-notice"),
    missingNoticeText: $("missing-notice-text"),
    removeMissing: $("remove-missing"),
    reviewStatus: $("review-status"),
    newBadge: $("new-badge-template"),
  };

  // ---------- the selection: the page's truth, kept whatever fails ----------

  const selected = new Set();
  const names = new Map(); // entity_id -> friendly name, for entity_names on save
  const acknowledged = new Set(); // sensitive entities the household confirmed
  for (const cb of el.fallback.querySelectorAll('input[name="allowlisted_entities"]')) {
    if (cb.checked) selected.add(cb.value);
    acknowledged.add(cb.value); // chosen before: already confirmed once
    if (cb.dataset.name) names.set(cb.value, cb.dataset.name);
  }
  el.fallback.addEventListener("change", (event) => {
    const cb = event.target;
    if (cb.name !== "allowlisted_entities") return;
    if (cb.checked) selected.add(cb.value);
    else selected.delete(cb.value);
  });

  // Unsaved changes: the settings and the choices, not the search or filter.
  let dirty = false;
  const markDirty = () => (dirty = true);
  for (const input of [el.enabled, el.url, el.token, el.remove]) input.addEventListener("input", markDirty);
  el.fallback.addEventListener("change", markDirty);
  window.addEventListener("beforeunload", (event) => {
    if (dirty) event.preventDefault();
  });

  // ---------- field errors ----------

  const fieldInputs = { base_url: el.url, access_token: el.token };

  function clearFieldErrors() {
    for (const input of Object.values(fieldInputs)) {
      input.removeAttribute("aria-invalid");
      const msg = $(`${input.id}-error`);
      if (msg) {
        msg.hidden = true;
        msg.textContent = "";
      }
    }
  }

  function showFieldError(error) {
    const input = fieldInputs[error.field];
    if (!input) return false;
    const msg = $(`${input.id}-error`);
    input.setAttribute("aria-invalid", "true");
    if (msg) {
      msg.textContent = error.message;
      msg.hidden = false;
      const described = (input.getAttribute("aria-describedby") || "").split(" ");
      if (!described.includes(msg.id)) {
        input.setAttribute("aria-describedby", [...described, msg.id].join(" ").trim());
      }
    }
    input.focus();
    return true;
  }

  // ---------- token status ----------

  function describeToken(stored, elsewhere = false) {
    el.tokenStatus.textContent = !stored
      ? "No token is stored yet."
      : elsewhere
        ? "A token is stored, but for another Home Assistant."
        : "A token is stored. Leave this field empty to keep it.";
  }

  function showTokenStored(stored) {
    el.tokenStatus.dataset.stored = String(stored);
    describeToken(stored);
    el.removeRow.hidden = !stored;
    el.remove.checked = false;
  }

  // ---------- the stored token belongs to its Home Assistant ----------

  // The server never sends the stored token to another origin (it refuses); this says so before Save or
  // Test connection is pressed, in the server's words rendered into the page.
  const originNote = {
    el: $("token-origin-note"),
    other: $("token-origin-other"),
    unbound: $("token-origin-unbound"),
    saved: $("token-origin-saved"),
    typed: $("token-origin-typed"),
  };

  /** scheme://host:port with the port written out, as the server's secret_store.origin_of; "" if not a URL. */
  function originOf(text) {
    let url;
    try {
      url = new URL(text.trim());
    } catch {
      return "";
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || !url.hostname) return "";
    return `${url.protocol}//${url.hostname}:${url.port || (url.protocol === "https:" ? "443" : "80")}`;
  }

  function showTokenOrigin() {
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
  }

  el.url.addEventListener("input", showTokenOrigin);
  el.token.addEventListener("input", showTokenOrigin);

  // ---------- discovery ----------

  async function discover() {
    el.discovery.hidden = false;
    el.discoverAgain.hidden = true;
    el.discoveryList.replaceChildren();
    $("discovery-title").hidden = true;
    setStatus(el.discoveryStatus, "Looking for Home Assistant on your network…", "busy");
    const result = await api("GET", urls.discover);
    el.discoverAgain.hidden = false;
    el.discoverAgain.textContent = "Look again";
    if (!result.ok) {
      setStatus(el.discoveryStatus, "Couldn’t look for Home Assistant on the network. Type its address below.");
      return;
    }
    const instances = result.data.instances || [];
    for (const instance of instances) {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.innerHTML =
        `<span class="visually-hidden">Use </span><strong>${esc(instance.name)}</strong>` +
        ` <span class="mono">${esc(instance.base_url)}</span>` +
        (instance.version ? ` <span class="hint">Home Assistant ${esc(instance.version)}</span>` : "");
      button.addEventListener("click", () => {
        // Only the address: the stored token stays with the Home Assistant it was saved for.
        el.url.value = instance.base_url;
        showTokenOrigin();
        dirty = true;
        setStatus(el.discoveryStatus, `Filled in the address of “${instance.name}”.`);
        el.token.focus();
      });
      item.append(button);
      el.discoveryList.append(item);
    }
    $("discovery-title").hidden = instances.length === 0;
    if (instances.length === 0) {
      setStatus(el.discoveryStatus, "No Home Assistant found on your network. Type its address below.");
    } else if (instances.length === 1 && el.url.value.trim() === "") {
      el.url.value = instances[0].base_url;
      showTokenOrigin();
      dirty = true;
      setStatus(el.discoveryStatus, `Found “${instances[0].name}” and filled in its address.`);
    } else if (instances.length === 1) {
      setStatus(el.discoveryStatus, `Found “${instances[0].name}”. Choose it to use its address.`);
    } else {
      setStatus(el.discoveryStatus, `Found ${instances.length}. Choose one to fill in its address.`);
    }
  }

  el.discoverAgain.addEventListener("click", discover);

  // ---------- test connection ----------

  el.test.addEventListener("click", async () => {
    clearFieldErrors();
    const body = {};
    if (el.url.value.trim()) body.base_url = el.url.value.trim();
    if (el.token.value.trim()) body.access_token = el.token.value.trim();
    const key = connectionKey(); // what is tested: typing during the test makes it another
    el.test.setAttribute("aria-disabled", "true");
    setStatus(el.testStatus, "Asking Home Assistant…", "busy");
    const result = await api("POST", urls.test, body);
    el.test.removeAttribute("aria-disabled");
    if (result.ok) {
      const where = result.data.location_name ? `“${result.data.location_name}”` : "Home Assistant";
      const version = result.data.version ? `, Home Assistant ${result.data.version}` : "";
      const next = dirty ? " Choose the entities below, then press Save to keep everything." : "";
      setStatus(el.testStatus, `Connected to ${where}${version}.${next}`, "ok");
      testedWith = key;
      showSteps();
      // The picker from what was just tested, before anything is saved: the same URL and token, so the
      // typed token goes only where the test sent it (the server applies the same rule).
      loadEntities(body);
    } else {
      if (result.error.field) showFieldError(result.error);
      showError(el.testStatus, result.error);
      if (result.error.code === "HA_TLS_ERROR") ca.section.open = true;
    }
  });

  // ---------- the entity picker ----------

  let entities = []; // {id, name, domain, state, unavailable, area, sensitive, missing, hay, row, cb, group, shown}
  let groups = []; // {el, countEl, visible, shownCount, hidden}
  const byId = new Map();

  let lastLoad; // what the picker was last asked to load from: the saved settings, or a tested pair
  let loadedOrigin = ""; // the Home Assistant the picker's list came from

  /** The picker's entities: from the saved settings, or (`tried`) from a URL and token just tested. */
  async function loadEntities(tried) {
    lastLoad = tried;
    el.pickerRetry.hidden = true;
    el.picker.setAttribute("aria-busy", "true");
    setStatus(el.pickerStatus, "Loading entities from Home Assistant…", "busy");
    const result = tried ? await api("POST", urls.preview, tried) : await api("GET", urls.entities);
    el.picker.removeAttribute("aria-busy");
    if (!result.ok) {
      const notConfigured = result.error.code === "CAPABILITY_NOT_CONFIGURED";
      // A token saved for another Home Assistant: the server's sentence says which, and what to do.
      if (result.error.reason === "token_for_another_origin") setStatus(el.pickerStatus, result.error.message, "error");
      else if (notConfigured) setStatus(el.pickerStatus, say(result.error));
      else showError(el.pickerStatus, result.error);
      el.pickerRetry.hidden = notConfigured;
      return;
    }
    if (!tried && el.url.value.trim() === savedUrl && el.token.value.trim() === "") testedWith = connectionKey();
    loadedOrigin = originOf(tried ? tried.base_url || savedUrl : savedUrl);
    render(result.data);
    showNew(result.data);
    showSteps();
    const total = number.format(result.data.entities.length);
    const areas = result.data.areas_known === false ? " Their areas couldn’t be read this time." : "";
    setStatus(el.pickerStatus, `Loaded ${total} entities from Home Assistant.${areas}`);
  }

  el.pickerRetry.addEventListener("click", () => loadEntities(lastLoad));

  function row(e, i) {
    const badges = [];
    if (e.missing) badges.push('<span class="badge badge--danger">Missing</span>');
    if (e.unavailable) badges.push('<span class="badge badge--warn">Unavailable</span>');
    if (e.sensitive) badges.push('<span class="badge badge--warn">Sensitive</span>');
    const state = e.missing || e.unavailable ? "" : `<span class="entity__state">${esc(e.state)}</span>`;
    return (
      `<li class="entity" data-i="${i}"><input type="checkbox" id="ent-${i}" value="${esc(e.id)}"` +
      `${selected.has(e.id) ? " checked" : ""}><label for="ent-${i}">` +
      `<span class="entity__name">${esc(e.name)}</span> <span class="entity__id">${esc(e.id)}</span>` +
      `${badges.length ? " " + badges.join(" ") : ""} ${state}</label></li>`
    );
  }

  /** Build the whole list once; filtering later only toggles `hidden`. */
  function render(data) {
    entities = [];
    byId.clear();
    for (const item of data.entities || []) {
      const e = {
        id: item.entity_id,
        name: item.friendly_name || item.entity_id,
        domain: item.domain || item.entity_id.split(".")[0],
        state: item.state == null ? "" : String(item.state),
        unavailable: Boolean(item.unavailable),
        area: item.area || NO_AREA,
        sensitive: Boolean(item.sensitive),
        missing: false,
      };
      if (item.friendly_name) names.set(e.id, item.friendly_name);
      entities.push(e);
      byId.set(e.id, e);
    }
    // Allowlisted entities Home Assistant no longer reports stay visible, so they can be removed.
    const missing = [...(data.missing || [])].map((m) => (typeof m === "string" ? { entity_id: m } : m));
    for (const id of selected) {
      if (!byId.has(id) && !missing.some((m) => m.entity_id === id)) missing.push({ entity_id: id });
    }
    for (const m of missing) {
      if (byId.has(m.entity_id)) continue;
      const e = {
        id: m.entity_id,
        name: m.friendly_name || names.get(m.entity_id) || m.entity_id,
        domain: m.entity_id.split(".")[0],
        state: "",
        unavailable: false,
        area: "",
        sensitive: Boolean(m.sensitive),
        missing: true,
      };
      entities.push(e);
      byId.set(e.id, e);
    }
    for (const e of entities) e.hay = `${e.name}\n${e.id}\n${e.area}`.toLowerCase();

    const byArea = new Map();
    for (const e of entities) {
      const key = e.missing ? "" : e.area;
      if (!byArea.has(key)) byArea.set(key, []);
      byArea.get(key).push(e);
    }
    const keys = [...byArea.keys()].sort((a, b) => {
      if (a === b) return 0;
      if (a === "") return -1; // missing ones first: they need a decision
      if (b === "") return 1;
      if (a === NO_AREA) return 1;
      if (b === NO_AREA) return -1;
      return collator.compare(a, b);
    });

    const html = [];
    let i = 0;
    const ordered = [];
    keys.forEach((key, g) => {
      const list = byArea.get(key).sort((a, b) => collator.compare(a.name, b.name) || (a.id < b.id ? -1 : 1));
      const title = key === "" ? "No longer in Home Assistant" : key;
      const hint =
        key === ""
          ? '<p class="hint">Home Assistant no longer reports these. Untick them and save to remove them.</p>'
          : "";
      html.push(
        `<div class="area-group${key === "" ? " area-group--missing" : ""}" role="group" aria-labelledby="grp-${g}">` +
          `<h3 id="grp-${g}">${esc(title)} <span class="count">(${list.length})</span></h3>${hint}<ul class="entity-list">`,
      );
      for (const e of list) {
        e.groupIndex = g;
        html.push(row(e, i));
        ordered.push(e);
        i += 1;
      }
      html.push("</ul></div>");
    });
    el.groups.innerHTML = html.join("");
    entities = ordered;

    groups = [...el.groups.children].map((groupEl) => ({
      el: groupEl,
      countEl: groupEl.querySelector(".count"),
      visible: 0,
      shownCount: -1,
      hidden: false,
    }));
    const rows = el.groups.querySelectorAll("li.entity");
    entities.forEach((e, n) => {
      e.row = rows[n];
      e.cb = rows[n].firstElementChild;
      e.group = groups[e.groupIndex];
      e.shown = true;
    });

    // Domain filter: every kind present, with how many of each.
    const domains = new Map();
    for (const e of entities) domains.set(e.domain, (domains.get(e.domain) || 0) + 1);
    const current = el.domain.value;
    el.domain.replaceChildren(new Option(`All kinds (${number.format(entities.length)})`, ""));
    for (const d of [...domains.keys()].sort()) {
      el.domain.append(new Option(`${d} (${number.format(domains.get(d))})`, d));
    }
    el.domain.value = domains.has(current) ? current : "";

    el.fallback.remove(); // the picker is the list now; the selection carried over
    el.picker.hidden = false;
    applyFilter();
  }

  let shownTotal = 0;

  function applyFilter() {
    const words = el.search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const domain = el.domain.value;
    const onlySelected = el.onlySelected.checked;
    const onlyNew = el.onlyNew.checked;
    for (const g of groups) g.visible = 0;
    let shown = 0;
    for (const e of entities) {
      let visible =
        (!domain || e.domain === domain) && (!onlySelected || selected.has(e.id)) && (!onlyNew || e.isNew);
      if (visible) {
        for (const w of words) {
          if (!e.hay.includes(w)) {
            visible = false;
            break;
          }
        }
      }
      if (visible !== e.shown) {
        e.shown = visible;
        e.row.hidden = !visible;
      }
      if (visible) {
        shown += 1;
        e.group.visible += 1;
      }
    }
    for (const g of groups) {
      const hide = g.visible === 0;
      if (hide !== g.hidden) {
        g.hidden = hide;
        g.el.hidden = hide;
      }
      if (g.visible !== g.shownCount) {
        g.shownCount = g.visible;
        g.countEl.textContent = `(${number.format(g.visible)})`;
      }
    }
    shownTotal = shown;
    el.empty.hidden = shown > 0;
    showCount();
  }

  function showCount() {
    let text = `${number.format(selected.size)} chosen · ${number.format(shownTotal)} of ${number.format(entities.length)} shown`;
    if (selected.size > LIMIT) text += ` · at most ${number.format(LIMIT)} can be saved`;
    el.count.textContent = text;
    el.count.className = selected.size > LIMIT ? "status--error" : "";
    showMissing();
    showSteps();
  }

  el.search.addEventListener("input", applyFilter);
  // Enter in the search box would submit the form, that is save: searching must never save.
  el.search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") event.preventDefault();
  });
  el.domain.addEventListener("change", applyFilter);
  el.onlySelected.addEventListener("change", applyFilter);
  el.onlyNew.addEventListener("change", applyFilter);

  // ---------- what changed in the house since the last review ----------

  const dateWords = new Intl.DateTimeFormat(undefined, { dateStyle: "long" });

  /** Mark the entities Home Assistant gained since the allowlist was last saved; none is ever ticked. */
  function showNew(data) {
    const fresh = new Set(data.new_entities || []);
    for (const e of entities) {
      e.isNew = fresh.has(e.id);
      if (e.isNew) e.row.querySelector("label").append(" ", el.newBadge.content.firstElementChild.cloneNode(true));
    }
    const n = entities.filter((e) => e.isNew).length;
    el.newNotice.hidden = n === 0;
    el.onlyNewRow.hidden = n === 0;
    if (n === 0) {
      if (el.onlyNew.checked) el.onlyNew.checked = false;
      applyFilter();
      return;
    }
    const when = data.reviewed_at ? ` on ${dateWords.format(new Date(data.reviewed_at))}` : "";
    el.newNoticeText.textContent =
      `Home Assistant has ${n === 1 ? "1 new entity" : `${number.format(n)} new entities`} since your ` +
      `choices were last saved${when}. None of them is chosen: tick “New since last review” to see ` +
      "them, and choose any the assistant may read.";
  }

  /** After a save that sent the picker's list: that list is the new review, so nothing is new now. */
  function clearNew() {
    for (const e of entities) {
      e.isNew = false;
      e.row.querySelector(".badge--new")?.remove();
    }
    el.onlyNew.checked = false;
    el.onlyNewRow.hidden = true;
    el.newNotice.hidden = true;
    applyFilter();
  }

  /** Chosen entities Home Assistant no longer has: say how many, and offer to untick them all at once. */
  function showMissing() {
    const n = entities.filter((e) => e.missing && selected.has(e.id)).length;
    el.missingNotice.hidden = n === 0;
    if (n === 0) return;
    el.missingNoticeText.textContent =
      `${n === 1 ? "1 chosen entity is" : `${number.format(n)} chosen entities are`} no longer in ` +
      "Home Assistant (listed first, under “No longer in Home Assistant”).";
  }

  el.removeMissing.addEventListener("click", () => {
    let removed = 0;
    for (const e of entities) {
      if (e.missing && selected.has(e.id)) {
        choose(e, false);
        removed += 1;
      }
    }
    dirty = dirty || removed > 0;
    showCount();
    setStatus(
      el.reviewStatus,
      `Unticked ${removed === 1 ? "1 entity" : `${number.format(removed)} entities`} no longer in Home ` +
        "Assistant. Press Save to keep this.",
    );
  });

  function choose(e, on) {
    if (on) selected.add(e.id);
    else selected.delete(e.id);
    if (e.cb.checked !== on) e.cb.checked = on;
  }

  // Sensitive entities need a confirm step before they are chosen, one at a time.
  let pendingSensitive = null;

  el.groups.addEventListener("click", (event) => {
    const cb = event.target;
    if (!(cb instanceof HTMLInputElement) || cb.type !== "checkbox") return;
    const e = entities[Number(cb.closest("li").dataset.i)];
    if (cb.checked && e.sensitive && !acknowledged.has(e.id)) {
      event.preventDefault(); // stays unticked until confirmed
      pendingSensitive = e;
      $("sensitive-name").textContent = e.name;
      $("sensitive-id").textContent = e.id;
      el.dialog.returnValue = "";
      el.dialog.showModal();
      return;
    }
    choose(e, cb.checked);
    dirty = true;
    showCount();
  });

  el.dialog.addEventListener("close", () => {
    const e = pendingSensitive;
    pendingSensitive = null;
    if (!e) return;
    if (el.dialog.returnValue === "allow") {
      acknowledged.add(e.id);
      choose(e, true);
      dirty = true;
      showCount();
      setStatus(el.bulkStatus, `Chose ${e.name}, a sensitive entity.`);
    }
    e.cb.focus();
  });

  // Bulk choices act on what the filter shows; sensitive ones are never chosen in bulk.
  el.selectShown.addEventListener("click", () => {
    let added = 0;
    let skipped = 0;
    for (const e of entities) {
      if (!e.shown || selected.has(e.id)) continue;
      if (e.sensitive && !acknowledged.has(e.id)) {
        skipped += 1;
        continue;
      }
      choose(e, true);
      added += 1;
    }
    dirty = dirty || added > 0;
    showCount();
    let text = added === 1 ? "Chose 1 more entity." : `Chose ${number.format(added)} more entities.`;
    if (skipped) {
      text += ` Left out ${number.format(skipped)} sensitive ${skipped === 1 ? "entity" : "entities"};` +
        " tick those one at a time if you want them.";
    }
    setStatus(el.bulkStatus, text);
  });

  el.clearShown.addEventListener("click", () => {
    let removed = 0;
    for (const e of entities) {
      if (e.shown && selected.has(e.id)) {
        choose(e, false);
        removed += 1;
      }
    }
    dirty = dirty || removed > 0;
    showCount();
    setStatus(el.bulkStatus, removed === 1 ? "Cleared 1 entity." : `Cleared ${number.format(removed)} entities.`);
  });

  // ---------- save ----------

  let saving = false;

  async function save(revision) {
    if (saving) return;
    saving = true;
    clearFieldErrors();
    el.saveAnyway.hidden = true;
    const allowlist = [...selected];
    const entityNames = {};
    for (const id of allowlist) {
      const name = (byId.get(id) && !byId.get(id).missing && byId.get(id).name !== id && byId.get(id).name) || names.get(id);
      if (name) entityNames[id] = name;
    }
    const body = {
      enabled: el.enabled.checked,
      base_url: el.url.value.trim(),
      allowlisted_entities: allowlist,
      entity_names: entityNames,
      revision,
    };
    // What the picker showed, remembered as reviewed; only when it came from the Home Assistant saved.
    // Past REVIEW_MAX the list is left out, so a save of a very large house stays within the Console's
    // 1 MiB request limit: "new since" then waits for a smaller list, the save never fails for it.
    const reviewed = loadedOrigin !== "" && loadedOrigin === originOf(body.base_url) && entities.length <= REVIEW_MAX;
    if (reviewed) body.reviewed_entities = entities.filter((e) => !e.missing).map((e) => e.id);
    const token = el.token.value.trim();
    if (token) body.access_token = token;
    else if (el.remove.checked) body.remove_access_token = true;
    const connectionChanged = Boolean(token) || el.remove.checked || body.base_url !== savedUrl;

    el.save.setAttribute("aria-disabled", "true");
    setStatus(el.saveStatus, "Saving…", "busy");
    const result = await api("POST", urls.config, body);
    el.save.removeAttribute("aria-disabled");
    saving = false;

    if (result.ok) {
      const data = result.data;
      el.revision.value = data.revision ?? el.revision.value;
      el.token.value = "";
      showTokenStored(Boolean(data.has_access_token));
      el.url.value = data.base_url ?? el.url.value;
      originNote.el.dataset.tokenOrigin = data.access_token_origin || "";
      showTokenOrigin();
      savedUrl = el.url.value;
      el.enabled.checked = Boolean(data.enabled);
      dirty = false;
      const n = (data.allowlisted_entities || allowlist).length;
      const entitiesText = n === 1 ? "1 entity" : `${number.format(n)} entities`;
      setStatus(
        el.saveStatus,
        data.enabled
          ? `Saved. The assistant may read ${entitiesText}, asking you first each time.`
          : "Saved. The assistant can’t read Home Assistant while “Let the assistant read Home Assistant” is unticked.",
        "ok",
      );
      showSteps();
      if (reviewed) clearNew();
      if (connectionChanged || entities.length === 0) loadEntities();
      return;
    }
    const error = result.error;
    if (error.code === "CONFIG_STALE") {
      setStatus(
        el.saveStatus,
        "Someone changed these settings elsewhere since you opened this page, so nothing was saved. " +
          "Your choices are still here. “Save mine anyway” replaces the other changes; reloading the " +
          "page shows them instead.",
        "error",
      );
      el.saveAnyway.hidden = false;
      return;
    }
    if (error.code === "CONFIG_INVALID") {
      setStatus(el.saveStatus, `${error.message} Reload the page to see what to do; nothing was saved.`, "error");
      return;
    }
    if (error.field) showFieldError(error);
    showError(el.saveStatus, error, error.code === "UNAUTHENTICATED" ? "" : " Nothing was saved; your choices are still here.");
  }

  let savedUrl = el.url.value.trim();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    save(el.revision.value);
  });

  el.saveAnyway.addEventListener("click", async () => {
    const current = await api("GET", urls.config);
    if (!current.ok) {
      showError(el.saveStatus, current.error, " Nothing was saved.");
      return;
    }
    await save(current.data.revision);
  });

  // ---------- the household's own CA certificate ----------

  const ca = {
    section: $("ca-section"),
    current: $("ca-current"),
    pem: $("ca-pem"),
    file: $("ca-file"),
    add: $("ca-add"),
    remove: $("ca-remove"),
    status: $("ca-status"),
    error: $("ca-pem-error"),
    template: $("ca-cert-template"),
  };
  const expiryWords = new Intl.DateTimeFormat(undefined, { dateStyle: "long" });

  /** What the Console trusts for https now, one block per certificate, built from the template. */
  function showCa(data) {
    const blocks = [];
    if (!data.stored) {
      const p = document.createElement("p");
      p.textContent = "No certificate added: https is checked against the authorities this Console trusts anyway.";
      blocks.push(p);
    } else if (!data.readable) {
      const p = document.createElement("p");
      p.className = "status--error";
      p.textContent = "The stored certificate file can’t be read. Add the certificate again, or remove it.";
      blocks.push(p);
    }
    if (data.managed_by_file) {
      const p = document.createElement("p");
      p.textContent = `Set in the settings file (${data.managed_by_file}); change it there.`;
      blocks.push(p);
    }
    for (const cert of data.certificates || []) {
      const block = ca.template.content.firstElementChild.cloneNode(true);
      block.querySelector(".ca-cert__words").textContent = cert.words;
      block.querySelector(".ca-cert__subject").textContent = cert.subject;
      block.querySelector(".ca-cert__issuer").textContent = cert.issuer === cert.subject ? `${cert.issuer} (itself)` : cert.issuer;
      block.querySelector(".ca-cert__expires").textContent = expiryWords.format(new Date(cert.not_after));
      blocks.push(block);
    }
    ca.current.replaceChildren(...blocks);
    ca.remove.hidden = !data.stored || Boolean(data.managed_by_file);
    ca.add.hidden = Boolean(data.managed_by_file);
    if (data.stored) ca.section.open = true;
  }

  function caError(error) {
    if (error.field === "ca_certificate") {
      ca.error.textContent = error.message;
      ca.error.hidden = false;
      ca.pem.setAttribute("aria-invalid", "true");
      ca.pem.focus();
      setStatus(ca.status, "Nothing was changed.", "error");
    } else {
      showError(ca.status, error);
    }
  }

  function clearCaError() {
    ca.error.hidden = true;
    ca.error.textContent = "";
    ca.pem.removeAttribute("aria-invalid");
  }

  async function loadCa() {
    const result = await api("GET", ca.section.dataset.caUrl);
    if (result.ok) showCa(result.data);
  }

  ca.file.addEventListener("change", async () => {
    const file = ca.file.files && ca.file.files[0];
    if (!file) return;
    if (file.size > 64 * 1024) {
      caError({ field: "ca_certificate", message: "This file is larger than a CA certificate." });
      return;
    }
    ca.pem.value = await file.text();
    clearCaError();
    setStatus(ca.status, `Read ${file.name}. Press Add certificate to use it.`);
  });

  ca.add.addEventListener("click", async () => {
    clearCaError();
    setStatus(ca.status, "Checking the certificate…", "busy");
    const result = await api("POST", ca.section.dataset.caUrl, { pem: ca.pem.value });
    if (!result.ok) {
      caError(result.error);
      return;
    }
    showCa(result.data);
    ca.pem.value = "";
    ca.file.value = "";
    setStatus(el.testStatus, ""); // a certificate error said before no longer holds; test again to know
    setStatus(ca.status, "Added. Test connection now checks Home Assistant’s certificate against it.", "ok");
  });

  ca.remove.addEventListener("click", async () => {
    clearCaError();
    const result = await api("DELETE", ca.section.dataset.caUrl);
    if (!result.ok) {
      caError(result.error);
      return;
    }
    showCa(result.data);
    setStatus(ca.status, "Removed. https is now checked against the authorities this Console trusts anyway.", "ok");
  });

  // ---------- the set-up steps ----------

  // The URL and token as typed: a test counts for these only, and typing anything else undoes it.
  const connectionKey = () => `${originOf(el.url.value)}\n${el.url.value.trim()}\n${el.token.value.trim()}`;
  let testedWith = null;

  const stepDone = {
    url: () => originOf(el.url.value) !== "",
    token: () =>
      el.token.value.trim() !== "" ||
      (el.tokenStatus.dataset.stored === "true" && !el.remove.checked &&
        originOf(el.url.value) !== "" && originOf(el.url.value) === (originNote.el.dataset.tokenOrigin || originOf(savedUrl))),
    test: () => testedWith !== null && testedWith === connectionKey(),
    entities: () => selected.size > 0,
    enabled: () => el.enabled.checked,
    save: () => !dirty && savedUrl !== "", // a URL was saved, and nothing changed since
  };

  /** Mark each step done or not, in words (the colour only repeats them). */
  function showSteps() {
    if (!el.steps) return;
    for (const item of el.steps.querySelectorAll("li[data-step]")) {
      const done = stepDone[item.dataset.step]();
      const state = item.querySelector(".step__state");
      state.dataset.state = done ? "done" : "todo";
      state.textContent = done ? "done" : "not done yet";
      item.classList.toggle("step--done", done);
    }
  }

  form.addEventListener("input", showSteps);
  form.addEventListener("change", showSteps);

  // ---------- start ----------

  el.test.hidden = false;
  if (el.steps) el.steps.hidden = false;
  ca.section.hidden = false;
  loadCa();
  showTokenOrigin();
  showSteps();
  if (el.url.value.trim() === "") {
    discover();
  } else {
    el.discovery.hidden = false;
    $("discovery-title").hidden = true;
    el.discoverAgain.hidden = false;
    el.discoverAgain.textContent = "Look for Home Assistant on the network";
  }
  loadEntities();
}

const form = document.getElementById("ha-settings");
if (form) init(form);
