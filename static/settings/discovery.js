// Looking for Home Assistant on the network: each instance found is a button that fills in its address.
// Buttons are cloned from the server-rendered #discovery-item-template and filled with textContent.

import { api } from "../api.js";
import { setStatus } from "./status.js";
import { words } from "../words.js";

export function setUpDiscovery(page) {
  const { el, $ } = page;
  const itemTemplate = $("discovery-item-template");

  function item(instance) {
    const li = itemTemplate.content.firstElementChild.cloneNode(true);
    li.querySelector("[data-slot=name]").textContent = instance.name;
    li.querySelector("[data-slot=url]").textContent = instance.base_url;
    const version = li.querySelector("[data-slot=version]");
    if (instance.version) version.textContent = version.dataset.words.replace("{version}", instance.version);
    else version.remove();
    li.querySelector("button").addEventListener("click", () => {
      // Only the address: the stored token stays with the Home Assistant it was saved for.
      el.url.value = instance.base_url;
      page.showTokenOrigin();
      page.dirty = true;
      setStatus(el.discoveryStatus, words("discovery-filled", { name: instance.name }));
      el.token.focus();
    });
    return li;
  }

  page.discover = async () => {
    el.discovery.hidden = false;
    el.discoverAgain.hidden = true;
    el.discoveryList.replaceChildren();
    $("discovery-title").hidden = true;
    setStatus(el.discoveryStatus, words("discovery-looking"), "busy");
    const result = await api("GET", page.urls.discover);
    el.discoverAgain.hidden = false;
    el.discoverAgain.textContent = el.discoverAgain.dataset.again;
    if (!result.ok) {
      setStatus(el.discoveryStatus, words("discovery-failed"));
      return;
    }
    // Only the Home Assistants not added yet (issue 29): the server leaves the others out, or marks them
    // `added`; either way no button offers one this Console already reads.
    const instances = (result.data.instances || []).filter((found) => !found.added);
    el.discoveryList.append(...instances.map(item));
    $("discovery-title").hidden = instances.length === 0;
    if (instances.length === 0) {
      setStatus(el.discoveryStatus, words("discovery-none"));
    } else if (instances.length === 1 && el.url.value.trim() === "") {
      el.url.value = instances[0].base_url;
      page.showTokenOrigin();
      page.dirty = true;
      setStatus(el.discoveryStatus, words("discovery-one-filled", { name: instances[0].name }));
    } else if (instances.length === 1) {
      setStatus(el.discoveryStatus, words("discovery-one", { name: instances[0].name }));
    } else {
      setStatus(el.discoveryStatus, words("discovery-many", { count: instances.length }));
    }
  };

  el.discoverAgain.addEventListener("click", page.discover);
}
