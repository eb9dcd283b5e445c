// The confirmations page's "Turn on notifications": asks the browser once, on the household's click (browsers
// allow the question only then), and says what was chosen. The notifications themselves are nav.js's, on
// every page. Without JavaScript, or in a browser without notifications, the section stays hidden.

const section = document.getElementById("notifications");
const button = document.getElementById("allow-notifications");

function show(state) {
  for (const part of section.querySelectorAll("[data-state]")) part.hidden = part.dataset.state !== state;
  // The button stays only while there is something to ask; its paragraph goes with it.
  button.parentElement.hidden = state !== "default";
}

if (section && "Notification" in window) {
  section.hidden = false;
  show(Notification.permission);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      show(await Notification.requestPermission());
    } finally {
      button.disabled = false;
    }
  });
}
