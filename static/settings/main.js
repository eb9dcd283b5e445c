// The Home Assistant settings page, enhanced: discovery, test connection, the live entity picker and
// saving through the JSON API. The page works without these modules; they make it pleasant.
//
// Each module sets up one part of the page on `page`, the state they share (the selection, whether
// anything is unsaved, what was tested) and the few functions one part calls in another. URLs and limits
// come from the form's data- attributes; markup from the page's <template> elements; failures in the
// words the server sends.

import { api } from "../api.js";
import { setStatus, showError } from "./status.js";
import { counted, words } from "../words.js";
import { originOf, setUpConnection } from "./connection.js";
import { setUpCa } from "./ca.js";
import { setUpDiscovery } from "./discovery.js";
import { setUpPicker } from "./picker.js";
import { setUpSteps } from "./steps.js";


function elements($) {
  return {
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
    area: $("area-filter"),
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
}

function start(form) {
  const $ = (id) => document.getElementById(id);
  // The filter of the page without JavaScript goes, and the live picker's own comes in its place: one
  // "Search entities", "Kind of entity" and "Area" on the page either way.
  $("nojs-picker")?.remove();
  $("entity-filter")?.remove();
  $("picker").prepend($("picker-toolbar-template").content.cloneNode(true));
  const el = elements($);
  const page = {
    form,
    el,
    $,
    // Each names the page's Home Assistant (`?instance=`, as the server rendered them; none for home), so
    // every read, test, list and save here is about that one, and the scripts know nothing of instances.
    urls: {
      config: form.dataset.configUrl,
      entities: form.dataset.entitiesUrl,
      discover: form.dataset.discoverUrl,
      test: form.dataset.testUrl,
      preview: form.dataset.previewUrl,
    },
    // The Home Assistant settings a save sends (console_ha.store.config.SETTINGS): name, type, default.
    fields: JSON.parse(form.dataset.fields || "[]"),
    limits: {
      // The server's maximum allowlist (console_ha.store.config.MAX_ALLOWLIST), from the page.
      allowlist: Number(form.dataset.allowlistLimit) || Infinity,
      // Entity ids sent as reviewed with a save, at most (console_ha.store.review.MAX_SENT_BY_PAGE).
      reviewed: Number(form.dataset.reviewLimit) || 0,
    },
    originNote: {
      el: $("token-origin-note"),
      other: $("token-origin-other"),
      unbound: $("token-origin-unbound"),
      saved: $("token-origin-saved"),
      typed: $("token-origin-typed"),
    },
    selected: new Set(), // the page's truth, kept whatever fails
    names: new Map(), // entity_id -> friendly name, for entity_names on save
    acknowledged: new Set(), // sensitive entities the household confirmed
    // entity_id -> what it costs of what the assistant can read at once, as the server priced it
    // (data-cost on the server's boxes, `cost` in the picker's JSON): the script has no formula of its own.
    costs: new Map(),
    dirty: false, // unsaved changes: the settings and the choices, not the search or filter
    savedUrl: el.url.value.trim(),
    testedWith: null,
  };

  // The chosen entities: ticked boxes, and (on a page of the list without JavaScript) those kept hidden.
  for (const cb of el.fallback.querySelectorAll('input[name="allowlisted_entities"]')) {
    if (cb.checked || cb.type === "hidden") page.selected.add(cb.value);
    page.acknowledged.add(cb.value); // chosen before: already confirmed once
    if (cb.dataset.name) page.names.set(cb.value, cb.dataset.name);
    if (cb.dataset.cost) page.costs.set(cb.value, Number(cb.dataset.cost));
  }

  /** Tell static/budget.js what the chosen entities cost, and what those listed cost (a synchronous event). */
  page.reportCost = () => {
    let used = 0;
    for (const id of page.selected) used += page.costs.get(id) || 0;
    let listedCost = 0;
    for (const cost of page.costs.values()) listedCost += cost;
    const detail = { chosen: page.selected.size, used, listed: page.costs.size, listedCost };
    document.dispatchEvent(new CustomEvent("allowlist-cost", { detail }));
  };
  el.fallback.addEventListener("change", (event) => {
    const cb = event.target;
    if (cb.name !== "allowlisted_entities") return;
    if (cb.checked) page.selected.add(cb.value);
    else page.selected.delete(cb.value);
    page.reportCost();
  });

  const markDirty = () => (page.dirty = true);
  for (const input of [el.enabled, el.url, el.token, el.remove]) input.addEventListener("input", markDirty);
  el.fallback.addEventListener("change", markDirty);
  window.addEventListener("beforeunload", (event) => {
    if (page.dirty) event.preventDefault();
  });

  setUpConnection(page);
  setUpDiscovery(page);
  setUpPicker(page);
  setUpSave(page);
  setUpCa(page);
  setUpSteps(page);

  el.test.hidden = false;
  page.reportCost();
  page.loadCa();
  page.showTokenOrigin();
  page.showSteps();
  if (el.url.value.trim() === "") {
    page.discover();
  } else {
    el.discovery.hidden = false;
    $("discovery-title").hidden = true;
    el.discoverAgain.hidden = false;
    el.discoverAgain.textContent = el.discoverAgain.dataset.first;
  }
  page.loadEntities();
}

/** Save: the settings and the choices in one request; a refusal loses nothing typed or ticked. */
function setUpSave(page) {
  const { el, form, selected, names } = page;
  let saving = false;

  async function save(revision) {
    if (saving) return;
    saving = true;
    page.clearFieldErrors();
    el.saveAnyway.hidden = true;
    const allowlist = [...selected];
    const entityNames = {};
    for (const id of allowlist) {
      const known = page.entityById(id);
      const name = (known && !known.missing && known.name !== id && known.name) || names.get(id);
      if (name) entityNames[id] = name;
    }
    // The settings a save sends, as the server declares them (`data-fields`): a boolean or a string from
    // the form field of its name, the lists from the picker.
    const fromPicker = { allowlisted_entities: allowlist, entity_names: entityNames };
    const body = {};
    for (const field of page.fields) {
      const input = form.elements.namedItem(field.name);
      // A setting this form has no field for (an instance's name is given by its own form) is left as saved.
      if (!input && (field.type === "boolean" || field.type === "string")) continue;
      if (field.type === "boolean") body[field.name] = input.checked;
      else if (field.type === "string") body[field.name] = input.value.trim();
      else body[field.name] = fromPicker[field.name] ?? field.default;
    }
    body.revision = revision;
    // What the picker showed, remembered as reviewed; only when it came from the Home Assistant saved.
    // Past the review limit the list is left out, so a save of a very large house stays within the
    // Console's 1 MiB request limit: "new since" then waits for a smaller list, the save never fails for it.
    const entities = page.entities();
    const reviewed = page.loadedOrigin !== "" && page.loadedOrigin === originOf(body.base_url) &&
      entities.length <= page.limits.reviewed;
    if (reviewed) body.reviewed_entities = entities.filter((e) => !e.missing).map((e) => e.id);
    const token = el.token.value.trim();
    if (token) body.access_token = token;
    else if (el.remove.checked) body.remove_access_token = true;
    const connectionChanged = Boolean(token) || el.remove.checked || body.base_url !== page.savedUrl;

    el.save.setAttribute("aria-disabled", "true");
    setStatus(el.saveStatus, "Saving…", "busy");
    const result = await api("POST", page.urls.config, body);
    el.save.removeAttribute("aria-disabled");
    saving = false;

    if (result.ok) {
      const data = result.data;
      el.revision.value = data.revision ?? el.revision.value;
      el.token.value = "";
      page.showTokenStored(Boolean(data.has_access_token));
      el.url.value = data.base_url ?? el.url.value;
      page.originNote.el.dataset.tokenOrigin = data.access_token_origin || "";
      page.showTokenOrigin();
      page.savedUrl = el.url.value;
      el.enabled.checked = Boolean(data.enabled);
      page.dirty = false;
      const n = (data.allowlisted_entities || allowlist).length;
      // On with nothing chosen: the server's words (words.NOTHING_CHOSEN, rendered in #nothing-chosen-words).
      const nothing = data.enabled && n === 0;
      setStatus(
        el.saveStatus,
        nothing
          ? page.$("nothing-chosen-words").content.textContent
          : data.enabled
            ? counted("saved-reading", n)
            : words("saved-off"),
        nothing ? "" : "ok",
      );
      page.showSteps();
      if (reviewed) page.clearNew();
      if (connectionChanged || page.entities().length === 0) page.loadEntities();
      return;
    }
    const error = result.error;
    if (error.code === "CONFIG_STALE") {
      // The page's answer to this code: its words name the button it shows (#stale-words, server-rendered).
      setStatus(el.saveStatus, page.$("stale-words").content.textContent, "error");
      el.saveAnyway.hidden = false;
      return;
    }
    if (error.code === "CONFIG_INVALID") {
      setStatus(el.saveStatus, `${error.message} ${words("reload-nothing-saved")}`, "error");
      return;
    }
    if (error.field) page.showFieldError(error);
    showError(el.saveStatus, error, error.code === "UNAUTHENTICATED" ? "" : ` ${words("nothing-saved-kept")}`);
  }

  form.addEventListener("submit", (event) => {
    // The list of the page without JavaScript stays until the live picker replaces it (or when it cannot
    // load): its Previous and Next buttons turn the page, as without JavaScript. The form posts as it is,
    // every tick and value typed going along (the server answers in place and saves nothing), so leaving
    // the page loses nothing and is not asked about.
    const button = event.submitter;
    if (button && button.name === "action" && button.value.startsWith("page-")) {
      page.dirty = false;
      return;
    }
    event.preventDefault();
    save(el.revision.value);
  });

  el.saveAnyway.addEventListener("click", async () => {
    const current = await api("GET", page.urls.config);
    if (!current.ok) {
      showError(el.saveStatus, current.error, ` ${words("nothing-saved")}`);
      return;
    }
    await save(current.data.revision);
  });
}

const form = document.getElementById("ha-settings");
if (form) start(form);
