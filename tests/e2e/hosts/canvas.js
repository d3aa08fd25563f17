// Test host: Canvas's side of lti.frameResize, as its documentation describes it. A message (an
// object or a JSON string) with subject "lti.frameResize" resizes the iframe it came from, and
// gets an object reply, {subject: "lti.frameResize.response"}, sent back to where it came from.
window.resizes = []; // every height asked for, in order
window.replies = 0;
window.addEventListener("message", (event) => {
  let m = event.data;
  if (typeof m === "string") {
    try {
      m = JSON.parse(m);
    } catch {
      return;
    }
  }
  if (!m || typeof m !== "object" || m.subject !== "lti.frameResize") return;
  const frame = [...document.querySelectorAll("iframe")].find((f) => f.contentWindow === event.source);
  if (!frame) return;
  const height = typeof m.height === "number" ? `${Math.max(m.height, 1)}px` : String(m.height);
  frame.setAttribute("height", height);
  frame.style.height = height;
  window.resizes.push(m.height);
  event.source.postMessage({ subject: "lti.frameResize.response" }, event.origin);
  window.replies += 1;
});
