// signoff web: progressive enhancement only. Every page works without this script.
// - polls a page's live fragment each second and swaps it in when its version changed
// - shows expiry countdowns
// - disables a form's buttons once it is submitted (a double-click sends one request)
"use strict";

function countdowns(root) {
  for (const el of root.querySelectorAll("time[data-expires]")) {
    const left = Math.floor((Date.parse(el.dataset.expires) - Date.now()) / 1000);
    if (left <= 0) { el.textContent = el.dataset.expiredText || "0:00"; continue; }
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    const mm = h ? String(m).padStart(2, "0") : String(m);
    el.textContent = (h ? h + ":" : "") + mm + ":" + String(s).padStart(2, "0");
  }
}

function guardForms(root) {
  for (const form of root.querySelectorAll("form[data-once]")) {
    if (form.dataset.guarded) continue;
    form.dataset.guarded = "1";
    form.addEventListener("submit", (event) => {
      if (form.dataset.sent) { event.preventDefault(); return; }
      form.dataset.sent = "1";
      // disable after the submit has captured the form's data
      setTimeout(() => {
        for (const b of form.querySelectorAll("button")) {
          b.disabled = true;
          if (b.dataset.busyText) b.textContent = b.dataset.busyText;
        }
      }, 0);
    });
  }
}

function editing(live) {
  const active = document.activeElement;
  return active && live.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName) && active.value;
}

async function poll(live) {
  if (!live.dataset.live) return;
  try {
    const response = await fetch(live.dataset.live, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
    if (response.ok) {
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();
      const fresh = holder.firstElementChild;
      if (fresh && fresh.dataset.version !== live.dataset.version && !editing(live)) {
        live.replaceChildren(...fresh.childNodes);
        live.dataset.version = fresh.dataset.version;
        guardForms(live);
        countdowns(live);
      }
    }
  } catch (_) { /* offline for a moment: try again next tick */ }
  setTimeout(() => poll(live), 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  guardForms(document);
  countdowns(document);
  setInterval(() => countdowns(document), 1000);
  const live = document.getElementById("live");
  if (live && live.dataset.live) setTimeout(() => poll(live), 1000);
});
