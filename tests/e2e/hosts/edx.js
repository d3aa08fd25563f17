// Test host: Open edX's side of a JSInput problem with sop="false", as the platform does it. It
// talks to the problem's iframe over jschannel: JSON strings, scope "JSInput", to the iframe's
// origin only. It pings when the frame loads and answers a ping with a pong; calls made before
// the handshake wait for it. On load it gives a stored state to setState; Submit calls getGrade,
// then getState, passes each result through decodeURI, and writes {answer, state} into the
// hidden input that goes to the grader.
const frame = document.querySelector("iframe[name^=iframe_]");
const input = document.querySelector("input[id^=input_]");
const origin = new URL(frame.src).origin;
const scope = "JSInput";
let ready = false;
let nextId = Math.floor(Math.random() * 1000000) + 1;
const waiting = new Map(); // id -> {resolve, reject}
const queue = [];
window.edx = { ready: () => ready, calls: [], errors: [], submitted: null, stored: sessionStorage.getItem("edx-state") };

function post(message) {
  frame.contentWindow.postMessage(JSON.stringify(message), origin);
}

function call(method, params = "") {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    waiting.set(id, { resolve, reject });
    const message = { id, method: `${scope}::${method}`, params };
    window.edx.calls.push(method);
    if (ready) post(message);
    else queue.push(message);
  });
}

window.addEventListener("message", (event) => {
  if (event.origin !== origin || event.source !== frame.contentWindow || typeof event.data !== "string") return;
  let m;
  try {
    m = JSON.parse(event.data);
  } catch {
    return;
  }
  if (m.method === `${scope}::__ready`) {
    if (m.params === "ping") post({ method: `${scope}::__ready`, params: "pong" });
    if (!ready) {
      ready = true;
      while (queue.length) post(queue.pop());
    }
    return;
  }
  const w = waiting.get(m.id);
  if (!w) return;
  waiting.delete(m.id);
  if ("error" in m) {
    window.edx.errors.push(`${m.error}: ${m.message}`);
    w.reject(new Error(m.message));
  } else {
    w.resolve(m.result);
  }
});

frame.addEventListener("load", () => {
  ready = false;
  post({ method: `${scope}::__ready`, params: "ping" });
});

// A stored state goes back into the problem once, when it loads.
if (window.edx.stored) call("setState", window.edx.stored).catch(() => {});

window.edx.submit = async () => {
  const answer = decodeURI(String(await call("getGrade")));
  const state = decodeURI(String(await call("getState")));
  input.value = JSON.stringify({ answer, state });
  window.edx.submitted = input.value;
  return input.value;
};
window.edx.setState = (state) => call("setState", state);
document.getElementById("submit").addEventListener("click", () => window.edx.submit());
