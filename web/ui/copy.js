// Copying from the page: to the clipboard where the browser allows it, and a button that says for
// a moment what happened.

/** Copy text to the clipboard; false when the browser does not allow it here. */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // blocked (for example in an iframe without clipboard-write): try the older way
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

// A button says what happened for a moment, then goes back to its name.
export function flash(button, text, ms = 1800) {
  if (!button) return;
  if (!button.dataset.label) button.dataset.label = button.textContent;
  button.textContent = text;
  clearTimeout(Number(button.dataset.timer));
  button.dataset.timer = String(setTimeout(() => {
    button.textContent = button.dataset.label;
  }, ms));
}
