// The model settings page: Test model and Save without leaving the page. The page works without this
// module (plain form posts); this keeps what was typed, fills the model choices, and says what happened.

import { api } from "./api.js";
import { words } from "./words.js";

const form = document.getElementById("model-settings");
const baseUrl = document.getElementById("base-url");
const model = document.getElementById("model");
const apiKey = document.getElementById("api-key");
const apiKeyStatus = document.getElementById("api-key-status");
const testButton = document.getElementById("test-model");
const saveButton = document.getElementById("save");
const testStatus = document.getElementById("test-status");
const saveStatus = document.getElementById("save-status");
const choices = document.getElementById("model-choices");
const modelList = document.getElementById("model-list");
const modelItems = document.getElementById("model-list-items");
const itemTemplate = document.getElementById("model-item");
const optionTemplate = document.getElementById("model-option");
const fields = { base_url: baseUrl, model, api_key: apiKey };

function say(element, text, kind = "") {
  element.textContent = text;
  element.className = kind ? `status status--${kind}` : "status";
}

function clearFieldErrors() {
  for (const [name, input] of Object.entries(fields)) {
    input.removeAttribute("aria-invalid");
    const error = document.getElementById(`${name.replace("_", "-")}-error`);
    if (error) {
      error.textContent = "";
      error.hidden = true;
    }
  }
}

function showFieldError(name, message) {
  const input = fields[name];
  const error = input && document.getElementById(`${name.replace("_", "-")}-error`);
  if (!error) return false;
  error.textContent = message;
  error.hidden = false;
  input.setAttribute("aria-invalid", "true");
  const described = new Set((input.getAttribute("aria-describedby") || "").split(" ").filter(Boolean));
  described.add(error.id);
  input.setAttribute("aria-describedby", [...described].join(" "));
  input.focus();
  return true;
}

function showModels(names) {
  // The server's own names, offered as the Model field's choices and listed for reading.
  choices.replaceChildren();
  modelItems.replaceChildren();
  for (const name of names) {
    const option = optionTemplate.content.firstElementChild.cloneNode(true);
    option.value = name;
    choices.append(option);
    const item = itemTemplate.content.firstElementChild.cloneNode(true);
    item.querySelector("code").textContent = name;
    modelItems.append(item);
  }
  modelList.hidden = names.length === 0;
}

function typed() {
  return { base_url: baseUrl.value.trim(), model: model.value.trim(), api_key: apiKey.value };
}

async function testModel() {
  clearFieldErrors();
  testButton.disabled = true;
  say(testStatus, words("testing"), "busy");
  const result = await api("POST", form.dataset.testUrl, typed()); // a 401 goes to the login page (api.js)
  testButton.disabled = false;
  if (!result.ok) {
    const { error } = result;
    if (error.code === "NETWORK") {
      say(testStatus, words("test-no-answer"), "error");
      return;
    }
    say(testStatus, error.message ?? words("test-failed"), "error");
    showFieldError(error.field, error.message ?? "");
    return;
  }
  const answer = result.data;
  showModels(answer.models ?? []);
  // The one model a server offers is chosen for you; choosing among several is a question, not an error.
  if (answer.chosen) model.value = answer.chosen;
  say(testStatus, answer.message, answer.ok ? "ok" : answer.is_error ? "error" : "");
}

async function save() {
  clearFieldErrors();
  saveButton.disabled = true;
  say(saveStatus, words("saving"), "busy");
  const remove = document.getElementById("remove-api-key");
  const body = { ...typed(), remove_api_key: Boolean(remove?.checked) };
  const result = await api("POST", form.dataset.configUrl, body); // a 401 goes to the login page (api.js)
  saveButton.disabled = false;
  if (!result.ok) {
    const { error } = result;
    if (error.code === "NETWORK") {
      say(saveStatus, words("save-no-answer"), "error");
      return;
    }
    say(saveStatus, `${error.message ?? words("save-failed")} ${words("nothing-saved")}`, "error");
    showFieldError(error.field, error.message ?? "");
    return;
  }
  const answer = result.data;
  // The key field is write-only: once saved, it empties again and the hint says a key is kept.
  apiKey.value = "";
  if (remove) remove.checked = false;
  apiKeyStatus.textContent = words(answer.has_api_key ? "key-saved" : "key-none");
  // The page's "not set up" notice no longer holds once a turn would reach a model.
  if (answer.ready) document.getElementById("model-problem")?.setAttribute("hidden", "");
  say(saveStatus, words(answer.api_key_removed ? "saved-key-removed" : "saved"), "ok");
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  if (event.submitter === testButton) testModel();
  else save();
});
