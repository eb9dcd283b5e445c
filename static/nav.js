// The nav's count of requests waiting on the Confirmations page, kept current on every page.
// Without this module the count is the one the page was rendered with.

const badge = document.getElementById("waiting-count");
const url = badge?.dataset.pendingUrl;
const everyMs = Math.max(1, Number(badge?.dataset.pollSeconds) || 15) * 1000;

async function refresh() {
  try {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const count = (await response.json()).pending.length;
    badge.hidden = count === 0;
    badge.querySelector("[data-slot=count]").textContent = String(count);
  } catch {
    // Offline for a moment: the next round tries again.
  }
}

if (badge && url) window.setInterval(refresh, everyMs);
