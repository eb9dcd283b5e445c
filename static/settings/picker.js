// The live entity picker: the list from Home Assistant, grouped by area, filtered as the household types.
// Groups and rows are cloned from the server-rendered #entity-group-template and #entity-row-template
// and filled with textContent; the list is built once per load, and filtering only toggles `hidden`.

import { api } from "../api.js";
import { say, setStatus, showError } from "./status.js";
import { originOf } from "./connection.js";
import { pageLocale } from "../clock.js";
import { counted, kindWords, words } from "../words.js";

const NO_AREA = words("no-area");
const collator = new Intl.Collator(undefined, { sensitivity: "base", numeric: true });
const dateWords = new Intl.DateTimeFormat(pageLocale(), { dateStyle: "long" });

export function setUpPicker(page) {
  const { el, $, selected, names, acknowledged } = page;
  // The templates' elements, brought into this document once; each row and group is a clone of these.
  const groupProto = document.importNode($("entity-group-template").content.firstElementChild, true);
  const rowTemplate = document.importNode($("entity-row-template").content.firstElementChild, true);

  let entities = []; // {id, name, domain, state, unavailable, area, sensitive, missing, hay, row, cb, group, shown}
  let groups = []; // {el, countEl, visible, shownCount, hidden}
  const byId = new Map();
  page.entities = () => entities;
  page.entityById = (id) => byId.get(id);

  let lastLoad; // what the picker was last asked to load from: the saved settings, or a tested pair
  page.loadedOrigin = ""; // the Home Assistant the picker's list came from

  /** The picker's entities: from the saved settings, or (`tried`) from a URL and token just tested. */
  page.loadEntities = async (tried) => {
    lastLoad = tried;
    el.pickerRetry.hidden = true;
    // No URL or no token saved: the server would answer 409 CAPABILITY_NOT_CONFIGURED (a red line in the
    // browser's console on every load of a Console not set up yet), so the picker says its words unasked.
    if (!tried && (page.savedUrl === "" || el.tokenStatus.dataset.stored !== "true")) {
      setStatus(el.pickerStatus, el.pickerStatus.dataset.notConfigured);
      return;
    }
    el.picker.setAttribute("aria-busy", "true");
    setStatus(el.pickerStatus, words("loading"), "busy");
    const result = tried ? await api("POST", page.urls.preview, tried) : await api("GET", page.urls.entities);
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
    if (!tried && el.url.value.trim() === page.savedUrl && el.token.value.trim() === "") {
      page.testedWith = page.connectionKey();
    }
    page.loadedOrigin = originOf(tried ? tried.base_url || page.savedUrl : page.savedUrl);
    render(result.data);
    showNew(result.data);
    page.showSteps();
    const loaded = counted("loaded", result.data.entities.length);
    setStatus(el.pickerStatus, result.data.areas_known === false ? `${loaded} ${words("areas-unknown")}` : loaded);
  };

  el.pickerRetry.addEventListener("click", () => page.loadEntities(lastLoad));

  // One prototype row for each mix of badges, made from the template once (at most eight): a row is then one
  // clone with its texts set, which keeps building 5,000 rows as quick as parsing one HTML string was.
  const rowProtos = new Map();
  function rowProto(e) {
    const key = `${e.missing}${e.unavailable}${e.sensitive}`;
    let proto = rowProtos.get(key);
    if (!proto) {
      proto = rowTemplate.cloneNode(true);
      for (const badge of proto.querySelectorAll("[data-badge]")) {
        if (e[badge.dataset.badge]) {
          badge.removeAttribute("data-badge");
        } else {
          badge.previousSibling.remove(); // the space before it
          badge.remove();
        }
      }
      if (e.missing || e.unavailable) proto.querySelector(".entity__state").remove();
      rowProtos.set(key, proto);
    }
    return proto;
  }

  /** One entity's row: its checkbox (named by the label, which holds the entity id), badges and state. */
  function row(e, i) {
    const li = rowProto(e).cloneNode(true);
    li.dataset.i = String(i);
    const cb = li.firstElementChild;
    cb.id = `ent-${i}`;
    cb.value = e.id;
    cb.checked = selected.has(e.id);
    const label = cb.nextElementSibling;
    label.htmlFor = cb.id;
    label.firstElementChild.textContent = e.name;
    label.firstElementChild.nextElementSibling.textContent = e.id;
    if (!e.missing && !e.unavailable) label.lastElementChild.textContent = e.state;
    e.row = li;
    e.cb = cb;
    return li;
  }

  /** One area's group: a labelled heading with its count, and (for the missing ones) what to do. */
  function group(key, g, count) {
    const div = groupProto.cloneNode(true);
    div.classList.toggle("area-group--missing", key === "");
    div.setAttribute("aria-labelledby", `grp-${g}`);
    const heading = div.querySelector("h3");
    heading.id = `grp-${g}`;
    heading.firstChild.data = `${key === "" ? words("missing-heading") : key} `; // the text before the count
    const countEl = div.querySelector(".count");
    countEl.textContent = words("count", { count });
    const hint = div.querySelector("[data-slot=missing-hint]");
    if (key === "") hint.removeAttribute("data-slot");
    else hint.remove();
    return { el: div, list: div.querySelector("ul"), countEl, visible: 0, shownCount: -1, hidden: false };
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
      page.costs.set(e.id, Number(item.cost) || 0);
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
      if (m.cost != null) page.costs.set(e.id, Number(m.cost) || 0);
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

    const fragment = document.createDocumentFragment();
    let i = 0;
    const ordered = [];
    groups = keys.map((key, g) => {
      const list = byArea.get(key).sort((a, b) => collator.compare(a.name, b.name) || (a.id < b.id ? -1 : 1));
      const built = group(key, g, list.length);
      for (const e of list) {
        built.list.append(row(e, i));
        e.group = built;
        e.shown = true;
        ordered.push(e);
        i += 1;
      }
      fragment.append(built.el);
      return built;
    });
    el.groups.replaceChildren(fragment);
    entities = ordered;

    // Kind filter: every kind present, with how many of each, in the server's words for it (data.kinds,
    // console_ha.words.KIND_NAMES, in the page's language in #script-words); a kind it did not name (a
    // missing entity's) shows its domain.
    const kindName = (d) => kindWords(d) || (data.kinds && data.kinds[d]) || d;
    const domains = new Map();
    for (const e of entities) domains.set(e.domain, (domains.get(e.domain) || 0) + 1);
    const current = el.domain.value;
    el.domain.replaceChildren(new Option(words("all-kinds", { count: entities.length }), ""));
    for (const d of [...domains.keys()].sort((a, b) => collator.compare(kindName(a), kindName(b)))) {
      el.domain.append(new Option(words("with-count", { name: kindName(d), count: domains.get(d) }), d));
    }
    el.domain.value = domains.has(current) ? current : "";

    // Area filter: the areas the groups are (missing ones have none to filter by), in the groups' order.
    const currentArea = el.area.value;
    el.area.replaceChildren(new Option(words("all-areas"), ""));
    for (const key of keys) {
      if (key !== "") el.area.append(new Option(words("with-count", { name: key, count: byArea.get(key).length }), key));
    }
    el.area.value = byArea.has(currentArea) && currentArea !== "" ? currentArea : "";

    el.fallback.remove(); // the picker is the list now; the selection carried over
    el.picker.hidden = false;
    applyFilter();
  }

  let shownTotal = 0;

  function applyFilter() {
    const searched = el.search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const domain = el.domain.value;
    const area = el.area.value;
    const onlySelected = el.onlySelected.checked;
    const onlyNew = el.onlyNew.checked;
    for (const g of groups) g.visible = 0;
    let shown = 0;
    for (const e of entities) {
      let visible =
        (!domain || e.domain === domain) && (!area || (!e.missing && e.area === area)) && (!onlySelected || selected.has(e.id)) && (!onlyNew || e.isNew);
      if (visible) {
        for (const w of searched) {
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
        g.countEl.textContent = words("count", { count: g.visible });
      }
    }
    shownTotal = shown;
    el.empty.hidden = shown > 0;
    showCount();
  }

  function showCount() {
    const limit = page.limits.allowlist;
    const counts = { chosen: selected.size, shown: shownTotal, total: entities.length, limit };
    el.count.textContent = words(selected.size > limit ? "picker-count-over" : "picker-count", counts);
    el.count.className = selected.size > limit ? "status--error" : "";
    page.reportCost(); // the meter, in this same task: it moves in the frame the count does
    showMissing();
    page.showSteps();
  }

  el.search.addEventListener("input", applyFilter);
  // Enter in the search box would submit the form, that is save: searching must never save.
  el.search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") event.preventDefault();
  });
  el.domain.addEventListener("change", applyFilter);
  el.area.addEventListener("change", applyFilter);
  el.onlySelected.addEventListener("change", applyFilter);
  el.onlyNew.addEventListener("change", applyFilter);

  // ---------- what changed in the house since the last review ----------

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
    el.newNoticeText.textContent = data.reviewed_at
      ? counted("new-entities-since", n, { date: dateWords.format(new Date(data.reviewed_at)) })
      : counted("new-entities", n);
  }

  /** After a save that sent the picker's list: that list is the new review, so nothing is new now. */
  page.clearNew = () => {
    for (const e of entities) {
      e.isNew = false;
      e.row.querySelector(".badge--new")?.remove();
    }
    el.onlyNew.checked = false;
    el.onlyNewRow.hidden = true;
    el.newNotice.hidden = true;
    applyFilter();
  };

  /** Chosen entities Home Assistant no longer has: say how many, and offer to untick them all at once. */
  function showMissing() {
    const n = entities.filter((e) => e.missing && selected.has(e.id)).length;
    el.missingNotice.hidden = n === 0;
    if (n === 0) return;
    el.missingNoticeText.textContent = counted("missing-chosen", n);
  }

  el.removeMissing.addEventListener("click", () => {
    const removed = untickWhere((e) => e.missing);
    page.dirty = page.dirty || removed > 0;
    showCount();
    setStatus(el.reviewStatus, counted("unticked-missing", removed));
  });

  function choose(e, on) {
    if (on) selected.add(e.id);
    else selected.delete(e.id);
    if (e.cb.checked !== on) e.cb.checked = on;
  }

  /** Untick every chosen entity `test` picks; how many were unticked. */
  function untickWhere(test) {
    let removed = 0;
    for (const e of entities) {
      if (test(e) && selected.has(e.id)) {
        choose(e, false);
        removed += 1;
      }
    }
    return removed;
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
    page.dirty = true;
    showCount();
  });

  el.dialog.addEventListener("close", () => {
    const e = pendingSensitive;
    pendingSensitive = null;
    if (!e) return;
    if (el.dialog.returnValue === "allow") {
      acknowledged.add(e.id);
      choose(e, true);
      page.dirty = true;
      showCount();
      setStatus(el.bulkStatus, words("chose-sensitive", { name: e.name }));
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
    page.dirty = page.dirty || added > 0;
    showCount();
    let text = counted("chose-more", added);
    if (skipped) text += ` ${counted("left-out", skipped)}`;
    setStatus(el.bulkStatus, text);
  });

  el.clearShown.addEventListener("click", () => {
    const removed = untickWhere((e) => e.shown);
    page.dirty = page.dirty || removed > 0;
    showCount();
    setStatus(el.bulkStatus, counted("cleared", removed));
  });
}
