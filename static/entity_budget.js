// The entity budget's proportions, for the meter (static/budget.js). The costs they are given are the
// server's own (console_ha/capabilities/entity_budget.py prices each entity; the page and the picker's
// JSON carry the prices), so no cost formula is copied here. tests/e2e/test_budget_meter.py checks that
// these give the server's "about N fit" and "Untick N" for a range of entities.

/** About how many entities like `count` that cost `cost` in all fit in `budgetBytes` (check_fits' `fits`). */
export function howManyFit(count, cost, budgetBytes) {
  return cost > 0 ? Math.floor((budgetBytes * count) / cost) : 0;
}

/** How many of `count` chosen entities costing `cost` to untick before a save can succeed (check_fits' sentence). */
export function howManyToUntick(count, cost, budgetBytes) {
  return count - howManyFit(count, cost, budgetBytes);
}
