// The entity budget's arithmetic, the page's one copy of console_ha/capabilities/entity_budget.py: it runs
// here because the meter follows every tick. Its numbers are the server's, served on the page
// (#budget-script's data-budget-bytes and data-entity-bytes); tests/e2e/test_budget_meter.py checks that
// these functions give the server's costs and its "about N fit" and "Untick N" for a range of entities.

/** The most bytes one entity can add to list_entities' result (entity_cost): `entityBytes`, its id, its domain. */
export function entityCost(entityId, entityBytes) {
  return entityBytes + entityId.length + entityId.indexOf(".");
}

/** What `entityIds` cost in all (allowlist_cost). */
export function allowlistCost(entityIds, entityBytes) {
  let cost = 0;
  for (const id of entityIds) cost += entityCost(id, entityBytes);
  return cost;
}

/** About how many entities like `count` that cost `cost` in all fit in `budgetBytes` (check_fits' `fits`). */
export function howManyFit(count, cost, budgetBytes) {
  return cost > 0 ? Math.floor((budgetBytes * count) / cost) : 0;
}

/** How many of `count` chosen entities costing `cost` to untick before a save can succeed (check_fits' sentence). */
export function howManyToUntick(count, cost, budgetBytes) {
  return count - howManyFit(count, cost, budgetBytes);
}
