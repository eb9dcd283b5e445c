// The nav's count of requests waiting on the Confirmations page, kept current on every page.
// Without this module the count is the one the page was rendered with.

import { api } from "./api.js";

const badge = document.getElementById("waiting-count");
const url = badge?.dataset.pendingUrl;
const everyMs = Math.max(1, Number(badge?.dataset.pollSeconds) || 15) * 1000;

async function refresh() {
  const result = await api("GET", url);
  if (!result.ok) return; // offline for a moment, or any other failure: the next round tries again
  const count = result.data.pending.length;
  badge.hidden = count === 0;
  badge.querySelector("[data-slot=count]").textContent = String(count);
}

if (badge && url) window.setInterval(refresh, everyMs);
