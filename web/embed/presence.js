// What is on the screen. The full page has every panel and every control; an embedded widget
// has only the panels and controls its link names (embed.js). Text that points at something
// ("the seed above", "Generate above") says what it needs, so it is never shown pointing at
// nothing:
//
//   <span data-needs="seed">the seed above</span>          only when the seed's control is shown
//   <span data-instead="seed" hidden>the widget's seed</span>   only when it is not
//   <details data-needs-any="top_k top_p min_p">            when any of them is shown
//
// Names are panel names (text, inspector, experiment, ...) and setting names (seed, top_k, ...).
// Scripts ask onScreen("controls") before writing words of the same kind.

let present = null; // null: everything is on the screen

/** True when every named panel or control is on the screen. */
export function onScreen(...names) {
  return !present || names.every((name) => present.has(name));
}

function words(node, attribute) {
  return (node.getAttribute(attribute) || "").split(/\s+/).filter(Boolean);
}

/**
 * Say what is on the screen (panel and setting names) and show or hide every piece of text that
 * depends on it. Hidden pieces get data-absent, which the style sheet hides whatever their own
 * hidden state.
 */
export function setOnScreen(names, root = document) {
  present = new Set(names);
  const show = (node, on) => {
    if (on) delete node.dataset.absent;
    else node.dataset.absent = "true";
  };
  for (const node of root.querySelectorAll("[data-needs]")) show(node, onScreen(...words(node, "data-needs")));
  for (const node of root.querySelectorAll("[data-needs-any]")) show(node, words(node, "data-needs-any").some((n) => present.has(n)));
  for (const node of root.querySelectorAll("[data-instead]")) {
    node.hidden = false;
    show(node, !onScreen(...words(node, "data-instead")));
  }
}
