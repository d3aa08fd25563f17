// Test host: records what the widget says, as a course page's own script would see it.
window.seen = []; // detail of every decodelab-* event of every <decodelab-embed>
window.seenAt = []; // [type, ms since the page began] of each
window.raw = []; // every message event: {origin, data}
window.addEventListener("message", (event) => window.raw.push({ origin: event.origin, data: event.data }));
for (const el of document.querySelectorAll("decodelab-embed")) {
  for (const type of ["ready", "started", "finished", "applied", "error", "height", "answered", "grade", "state"]) {
    el.addEventListener(`decodelab-${type}`, (event) => {
      window.seen.push(event.detail);
      window.seenAt.push([type, performance.now()]);
    });
  }
}
// For pages with a plain iframe: post to the widget the way the docs show.
window.sendToWidget = (message) => {
  const frame = document.querySelector("iframe[data-widget]");
  frame.contentWindow.postMessage(message, new URL(frame.src).origin);
};
