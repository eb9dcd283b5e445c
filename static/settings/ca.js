// The household's own CA certificate for https: what the Console trusts now, and adding or removing one.
// Each certificate is cloned from the server-rendered #ca-cert-template and filled with textContent.

import { api } from "../api.js";
import { setStatus, showError } from "./status.js";
import { words } from "../words.js";

const expiryWords = new Intl.DateTimeFormat(undefined, { dateStyle: "long" });

export function setUpCa(page) {
  const { el, $ } = page;
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
    dialog: $("ca-remove-dialog"),
  };
  // The largest PEM the server accepts (console_ha.store.ca_certificate.MAX_PEM_BYTES), from the page.
  const maxBytes = Number(ca.section.dataset.caMaxBytes) || Infinity;

  page.openCa = () => {
    ca.section.open = true;
  };

  /** What the Console trusts for https now, one block per certificate, built from the template. */
  function showCa(data) {
    const blocks = [];
    if (!data.stored) {
      const p = document.createElement("p");
      p.textContent = ca.current.dataset.none;
      blocks.push(p);
    } else if (!data.readable) {
      const p = document.createElement("p");
      p.className = "status--error";
      p.textContent = ca.current.dataset.unreadable;
      blocks.push(p);
    }
    if (data.managed_by_file) {
      const p = document.createElement("p");
      p.textContent = ca.current.dataset.managed.replace("{file}", data.managed_by_file);
      blocks.push(p);
    }
    for (const cert of data.certificates || []) {
      const block = ca.template.content.firstElementChild.cloneNode(true);
      block.querySelector(".ca-cert__words").textContent = cert.words;
      block.querySelector(".ca-cert__subject").textContent = cert.subject;
      const issuer = block.querySelector(".ca-cert__issuer");
      issuer.textContent = cert.issuer === cert.subject ? issuer.dataset.itself.replace("{issuer}", cert.issuer) : cert.issuer;
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
      setStatus(ca.status, words("nothing-changed"), "error");
    } else {
      showError(ca.status, error);
    }
  }

  function clearCaError() {
    ca.error.hidden = true;
    ca.error.textContent = "";
    ca.pem.removeAttribute("aria-invalid");
  }

  page.loadCa = async () => {
    const result = await api("GET", ca.section.dataset.caUrl);
    if (result.ok) showCa(result.data);
  };

  ca.file.addEventListener("change", async () => {
    const file = ca.file.files && ca.file.files[0];
    if (!file) return;
    if (file.size > maxBytes) {
      caError({ field: "ca_certificate", message: words("ca-too-large") });
      return;
    }
    ca.pem.value = await file.text();
    clearCaError();
    setStatus(ca.status, words("ca-read", { file: file.name }));
  });

  // Add and Remove are submit buttons, for the page without JavaScript; here they act in place.
  ca.add.addEventListener("click", async (event) => {
    event.preventDefault();
    clearCaError();
    setStatus(ca.status, words("ca-checking"), "busy");
    const result = await api("POST", ca.section.dataset.caUrl, { pem: ca.pem.value });
    if (!result.ok) {
      caError(result.error);
      return;
    }
    showCa(result.data);
    ca.pem.value = "";
    ca.file.value = "";
    setStatus(el.testStatus, ""); // a certificate error said before no longer holds; test again to know
    setStatus(ca.status, $("ca-added-words").content.textContent, "ok");
  });

  // Remove asks first (#ca-remove-dialog, the server's question); it acts at once, without Save.
  ca.remove.addEventListener("click", (event) => {
    event.preventDefault();
    ca.dialog.returnValue = "";
    ca.dialog.showModal();
  });

  ca.dialog.addEventListener("close", async () => {
    if (ca.dialog.returnValue !== "remove") {
      ca.remove.focus();
      return;
    }
    clearCaError();
    const result = await api("DELETE", ca.section.dataset.caUrl);
    if (!result.ok) {
      caError(result.error);
      return;
    }
    showCa(result.data);
    setStatus(ca.status, $("ca-removed-words").content.textContent, "ok");
    ca.pem.focus();
  });

  ca.section.hidden = false;
}
