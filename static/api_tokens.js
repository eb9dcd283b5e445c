// The API tokens page: copy buttons for the new token and its configurations, and Revoke asking in a dialog.
// The page works without this module: the token and configurations are selectable text, and each Revoke
// opens a page of its own that asks the same question.

const newToken = document.querySelector(".new-token");
const copyStatus = newToken?.querySelector("[data-slot=copy-status]");

function textOf(element) {
  return element instanceof HTMLInputElement ? element.value : element.textContent;
}

// The clipboard API needs a secure context (https, or loopback); a Console on http://console.local is not
// one, so the older copy of a selection is the fallback there.
async function copy(element) {
  const text = textOf(element);
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // fall through to the selection
    }
  }
  if (element instanceof HTMLInputElement) {
    element.select();
  } else {
    window.getSelection().selectAllChildren(element);
  }
  try {
    return document.execCommand("copy");
  } catch {
    return false;
  }
}

if (newToken) {
  for (const button of newToken.querySelectorAll("button[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      const copied = await copy(document.getElementById(button.dataset.copy));
      copyStatus.textContent = copied ? newToken.dataset.copied : newToken.dataset.copyFailed;
    });
  }
}

const dialog = document.getElementById("revoke-dialog");

if (dialog && typeof dialog.showModal === "function") {
  const form = dialog.querySelector("form");
  const confirm = dialog.querySelector("[data-slot=confirm]");
  dialog.querySelector("[data-slot=cancel]").addEventListener("click", () => dialog.close());
  document.addEventListener("submit", (event) => {
    const asking = event.target.closest("form[data-revoke-url]");
    if (!asking) return;
    event.preventDefault();
    const name = asking.dataset.tokenName;
    // The server's sentences, in the page's language, with the token's name in its place.
    const title = dialog.querySelector("#revoke-dialog-title");
    title.textContent = title.dataset.words.replace("{name}", name);
    form.action = asking.dataset.revokeUrl;
    confirm.setAttribute("aria-label", confirm.dataset.label.replace("{name}", name));
    dialog.showModal();
  });
}
