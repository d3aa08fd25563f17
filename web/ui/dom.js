// The page's two ways into the document: an element by its id, and a new element with class
// names and text. User and model text only ever goes in through textContent.

export const $ = (id) => document.getElementById(id);

/** Create an element with optional class names and text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}
