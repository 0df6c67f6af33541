// signoff web: progressive enhancement only. Every page works without this script.
// - follows a live page's event stream and swaps in the fragments the web pushes; only when
//   the stream cannot be opened does it poll the page's /live fragment each second instead
// - shows expiry countdowns (client-side: no request)
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

// a fragment (pushed or polled) replaces the live section when its version is new
function swap(live, html, pending) {
  const holder = document.createElement("div");
  holder.innerHTML = html;
  const fresh = holder.firstElementChild;
  if (!fresh || fresh.dataset.version === live.dataset.version) return;
  if (editing(live)) { pending.html = html; return; }  // not under the person's typing
  pending.html = null;
  live.replaceChildren(...fresh.childNodes);
  live.dataset.version = fresh.dataset.version;
  guardForms(live);
  countdowns(live);
}

async function poll(live, pending) {
  try {
    const response = await fetch(live.dataset.live, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
    if (response.ok) swap(live, await response.text(), pending);
  } catch (_) { /* offline for a moment: try again next tick */ }
  setTimeout(() => poll(live, pending), 1000);
}

function follow(live, pending) {
  let polling = false;
  const fallBack = () => {
    if (polling) return;
    polling = true;
    live.dataset.mode = "poll";
    setTimeout(() => poll(live, pending), 1000);
  };
  if (!live.dataset.events || typeof EventSource === "undefined") { fallBack(); return; }
  const url = live.dataset.events + "?v=" + encodeURIComponent(live.dataset.version || "");
  const stream = new EventSource(url);
  let opened = false;
  stream.onopen = () => { opened = true; live.dataset.mode = "push"; };
  stream.addEventListener("fragment", (event) => swap(live, event.data, pending));
  const stop = () => { stream.close(); fallBack(); };
  stream.addEventListener("unavailable", stop);
  stream.addEventListener("gone", () => stream.close());
  // refused outright (never opened), or closed for good: poll instead
  stream.onerror = () => { if (!opened || stream.readyState === EventSource.CLOSED) stop(); };
  // a fragment held back while the person typed is shown once they leave the field
  live.addEventListener("focusout", () => setTimeout(() => {
    if (pending.html) swap(live, pending.html, pending);
  }, 0));
}

document.addEventListener("DOMContentLoaded", () => {
  guardForms(document);
  countdowns(document);
  setInterval(() => countdowns(document), 1000);
  const live = document.getElementById("live");
  if (live && live.dataset.live) follow(live, { html: null });
});
