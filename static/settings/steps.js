// The set-up steps, each marked done in words (the colour only repeats them).

import { originOf } from "./connection.js";

export function setUpSteps(page) {
  const { el, form, selected, originNote } = page;

  const stepDone = {
    url: () => originOf(el.url.value) !== "",
    token: () =>
      el.token.value.trim() !== "" ||
      (el.tokenStatus.dataset.stored === "true" && !el.remove.checked &&
        originOf(el.url.value) !== "" &&
        originOf(el.url.value) === (originNote.el.dataset.tokenOrigin || originOf(page.savedUrl))),
    test: () => page.testedWith !== null && page.testedWith === page.connectionKey(),
    entities: () => selected.size > 0,
    enabled: () => el.enabled.checked,
    save: () => !page.dirty && page.savedUrl !== "", // a URL was saved, and nothing changed since
  };

  page.showSteps = () => {
    if (!el.steps) return;
    for (const item of el.steps.querySelectorAll("li[data-step]")) {
      const done = stepDone[item.dataset.step]();
      const state = item.querySelector(".step__state");
      state.dataset.state = done ? "done" : "todo";
      state.textContent = done ? state.dataset.done : state.dataset.todo; // the server's words for each
      item.classList.toggle("step--done", done);
    }
  };

  form.addEventListener("input", page.showSteps);
  form.addEventListener("change", page.showSteps);
  if (el.steps) el.steps.hidden = false;
}
