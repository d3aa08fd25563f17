// From a third origin, try to drive every other frame of the page like a host would.
let tries = 0;
const timer = setInterval(() => {
  for (let i = 0; i < window.parent.frames.length; i++) {
    const frame = window.parent.frames[i];
    if (frame !== window) frame.postMessage({ decodelab: 1, type: "settings", settings: { seed: 999 }, generate: true }, "*");
  }
  tries += 1;
  if (tries >= 40) clearInterval(timer);
}, 250);
