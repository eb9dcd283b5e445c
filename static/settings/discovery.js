// Looking for Home Assistant on the network: each instance found is a button that fills in its address.
// Buttons are cloned from the server-rendered #discovery-item-template and filled with textContent.

import { api } from "../api.js";
import { setStatus } from "./status.js";

export function setUpDiscovery(page) {
  const { el, $ } = page;
  const itemTemplate = $("discovery-item-template");

  function item(instance) {
    const li = itemTemplate.content.firstElementChild.cloneNode(true);
    li.querySelector("[data-slot=name]").textContent = instance.name;
    li.querySelector("[data-slot=url]").textContent = instance.base_url;
    if (instance.version) li.querySelector("[data-slot=version-number]").textContent = instance.version;
    else li.querySelector("[data-slot=version]").remove();
    li.querySelector("button").addEventListener("click", () => {
      // Only the address: the stored token stays with the Home Assistant it was saved for.
      el.url.value = instance.base_url;
      page.showTokenOrigin();
      page.dirty = true;
      setStatus(el.discoveryStatus, `Filled in the address of “${instance.name}”.`);
      el.token.focus();
    });
    return li;
  }

  page.discover = async () => {
    el.discovery.hidden = false;
    el.discoverAgain.hidden = true;
    el.discoveryList.replaceChildren();
    $("discovery-title").hidden = true;
    setStatus(el.discoveryStatus, "Looking for Home Assistant on your network…", "busy");
    const result = await api("GET", page.urls.discover);
    el.discoverAgain.hidden = false;
    el.discoverAgain.textContent = "Look again";
    if (!result.ok) {
      setStatus(el.discoveryStatus, "Couldn’t look for Home Assistant on the network. Type its address below.");
      return;
    }
    const instances = result.data.instances || [];
    el.discoveryList.append(...instances.map(item));
    $("discovery-title").hidden = instances.length === 0;
    if (instances.length === 0) {
      setStatus(el.discoveryStatus, "No Home Assistant found on your network. Type its address below.");
    } else if (instances.length === 1 && el.url.value.trim() === "") {
      el.url.value = instances[0].base_url;
      page.showTokenOrigin();
      page.dirty = true;
      setStatus(el.discoveryStatus, `Found “${instances[0].name}” and filled in its address.`);
    } else if (instances.length === 1) {
      setStatus(el.discoveryStatus, `Found “${instances[0].name}”. Choose it to use its address.`);
    } else {
      setStatus(el.discoveryStatus, `Found ${instances.length}. Choose one to fill in its address.`);
    }
  };

  el.discoverAgain.addEventListener("click", page.discover);
}
