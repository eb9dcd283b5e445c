// How much of what the assistant can read at once the ticked entities take (docs/security.md).
//
// list_entities answers within 64 KiB, and a save is refused when the chosen entities could not fit.
// This script shows, while boxes are ticked, how close the choice is. The server sends the two numbers
// of its cost formula on this script's element (console_ha/capabilities/entity_budget.py: `budget-bytes`
// is what the entities may take in all, `entity-bytes` what each costs besides its id and domain), and
// ./entity_budget.js does the arithmetic with them. It reads the page's checkboxes and never changes
// them: static/settings/ owns the picker.

import { allowlistCost, howManyFit, howManyToUntick } from "./entity_budget.js";

const script = document.getElementById("budget-script");
const BUDGET = Number(script.dataset.budgetBytes);
const ENTITY_BYTES = Number(script.dataset.entityBytes);
// The entity-id rule of a save (console_ha.ha.addresses.ENTITY_ID_RE), from the settings form.
const ENTITY_ID = new RegExp(document.getElementById("ha-settings")?.dataset.entityIdPattern || "^$");
const number = new Intl.NumberFormat();

const section = document.getElementById("picker")?.closest("section");
if (section && BUDGET > 0 && ENTITY_BYTES > 0) {
  // The status sentence and its meter, cloned from the page's #budget-template (the meter's bounds are there).
  const parts = document.getElementById("budget-template").content.cloneNode(true);
  const region = parts.getElementById("allowlist-budget");
  const meter = parts.getElementById("allowlist-budget-meter");
  document.getElementById("picker").before(parts);

  /** Entity ids of every box now on the page, and of the ticked ones. */
  function boxes() {
    const all = new Set();
    const ticked = new Set();
    for (const cb of section.querySelectorAll('input[type="checkbox"]')) {
      if (!ENTITY_ID.test(cb.value)) continue;
      all.add(cb.value);
      if (cb.checked) ticked.add(cb.value);
    }
    return { all, ticked };
  }

  let shown = "";

  function update() {
    const { all, ticked } = boxes();
    const used = allowlistCost(ticked, ENTITY_BYTES);
    // "About" how many fit: the budget over the average cost of these entities (or of all listed).
    const sample = ticked.size ? ticked : all;
    const about = howManyFit(sample.size, allowlistCost(sample, ENTITY_BYTES), BUDGET);
    let text;
    if (used > BUDGET) {
      const untick = howManyToUntick(ticked.size, used, BUDGET);
      text =
        `Too many for the assistant to read at once: about ${number.format(about)} of these fit, and ` +
        `${number.format(ticked.size)} are chosen. Untick ${number.format(untick)} or more before saving.`;
    } else if (ticked.size === 0) {
      text = about
        ? `Nothing chosen yet. The assistant can read about ${number.format(about)} entities at once.`
        : "Nothing chosen yet.";
    } else {
      const percent = Math.floor((used / BUDGET) * 100);
      text =
        `Uses ${percent}% of what the assistant can read at once ` +
        `(${number.format(ticked.size)} of about ${number.format(about)} entities).`;
    }
    meter.value = Math.min(used / BUDGET, 1);
    region.classList.toggle("status--error", used > BUDGET);
    if (text !== shown) {
      shown = text; // an unchanged sentence is not announced again
      region.textContent = text;
    }
  }

  // The picker ticks boxes in its own handlers (one box, "Select all shown", the sensitive dialog)
  // and builds the list when entities arrive: recount after whatever it does, once per task.
  let queued = false;
  function later() {
    if (queued) return;
    queued = true;
    setTimeout(() => {
      queued = false;
      update();
    }, 0);
  }
  for (const type of ["click", "change", "keyup"]) section.addEventListener(type, later);
  document.addEventListener("close", later, true); // a dialog's close does not bubble
  new MutationObserver(later).observe(section, { childList: true, subtree: true });
  update();
}
