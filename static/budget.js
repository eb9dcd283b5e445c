// How much of what the assistant can read at once the ticked entities take (docs/security.md).
//
// list_entities answers within 64 KiB, and a save is refused when the chosen entities could not fit.
// This script shows, while boxes are ticked, how close the choice is. Every number is the server's: the
// budget on this script's element (`data-budget-bytes`, console_ha/capabilities/entity_budget.py), and
// each entity's cost as the server priced it, summed by static/settings/ and sent here in an
// "allowlist-cost" event in the same task as the picker's count, so the two move in the same frame.
// ./entity_budget.js turns the sums into "about N fit" and "untick N"; no cost formula is in a script.

import { howManyFit, howManyToUntick } from "./entity_budget.js";
import { words } from "./words.js";

const script = document.getElementById("budget-script");
const BUDGET = Number(script.dataset.budgetBytes);

const picker = document.getElementById("picker");
if (picker && BUDGET > 0) {
  // The status sentence and its meter, cloned from the page's #budget-template (the meter's bounds are there).
  const parts = document.getElementById("budget-template").content.cloneNode(true);
  const region = parts.getElementById("allowlist-budget");
  const meter = parts.getElementById("allowlist-budget-meter");
  picker.before(parts);

  let shown = "";

  /** The sentence and the bar for `chosen` entities costing `used`, of `listed` entities costing `listedCost`. */
  function update({ chosen, used, listed, listedCost }) {
    // "About" how many fit: while the choice fits, by the average of every entity listed, which ticking does
    // not move; past the budget, by the chosen ones, as the save's refusal reckons it.
    const over = used > BUDGET;
    const about = over ? howManyFit(chosen, used, BUDGET) : howManyFit(listed, listedCost, BUDGET);
    let text;
    if (over) {
      const untick = howManyToUntick(chosen, used, BUDGET);
      text = words("budget-over", { about, chosen, untick });
    } else if (chosen === 0) {
      text = about ? words("budget-none-about", { about }) : words("budget-none");
    } else {
      const percent = Math.floor((used / BUDGET) * 100);
      text = words("budget-uses", { percent, chosen, about });
    }
    meter.value = Math.min(used / BUDGET, 1);
    region.classList.toggle("status--error", over);
    if (text !== shown) {
      shown = text; // an unchanged sentence is not announced again
      region.textContent = text;
    }
  }

  document.addEventListener("allowlist-cost", (event) => update(event.detail));
}
