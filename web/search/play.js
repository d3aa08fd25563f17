// Step through a search as it happened: a range (the step or round shown) and a Play button
// that moves it from the start to the end, one position every `ms`, and stops at the end, on a
// second press, or when the learner takes the range (which then draws where it is put). `ms` is
// a number, or a function read at every move (a speed the learner can change while it plays).

export function createPlayer(range, button, draw, ms = 650) {
  let timer = null;
  const wait = () => (typeof ms === "function" ? ms() : ms);

  function stop() {
    if (timer == null) return;
    clearTimeout(timer);
    timer = null;
    button.textContent = "Play";
    button.setAttribute("aria-pressed", "false");
  }

  function tick() {
    const next = Number(range.value) + 1;
    if (next > Number(range.max)) {
      stop();
      return;
    }
    range.value = String(next);
    draw(next);
    timer = setTimeout(tick, wait()); // the next, once this one is drawn
  }

  button.addEventListener("click", () => {
    if (timer != null) {
      stop();
      return;
    }
    if (Number(range.value) >= Number(range.max)) {
      range.value = "0";
      draw(0);
    }
    button.textContent = "Pause";
    button.setAttribute("aria-pressed", "true");
    timer = setTimeout(tick, wait());
  });
  range.addEventListener("input", () => {
    stop();
    draw(Number(range.value));
  });

  return {
    stop,
    /** A new search is shown: nothing plays, and there is something to play when it has steps. */
    reset() {
      stop();
      button.disabled = Number(range.max) < 1;
    },
  };
}
