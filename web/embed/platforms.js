// Learning platforms that talk to an iframe in their own way, chosen by the link's ?lms= (the
// widget's own message API, embed.js, works alongside; detecting a platform by guessing is not
// safe, so a course author opts in):
//
//   canvas  Canvas sizes an iframe in a page when the iframe posts
//           {subject: "lti.frameResize", height: <pixels>} to it. The widget does so whenever its
//           height changes, the poster's included.
//   edx     An Open edX JSInput problem grades an iframe through three functions: getGrade (the
//           answer, a string), getState (a string to save) and setState (that string, back).
//           From another origin it calls them over jschannel: JSON strings posted both ways in
//           the scope "JSInput", after a ping/pong handshake; a request is
//           {"id": n, "method": "JSInput::getGrade", "params": ...}, answered with
//           {"id": n, "result": ...} or {"id": n, "error": ..., "message": ...}. On its own
//           origin it calls window.getGrade() and the others directly; both are offered.
//
// The answer and the state are JSON (the quiz's grade and state, questions.js). Over jschannel
// the platform passes every result through decodeURI, so they are sent URI-encoded, which
// decodeURI turns back into exactly the JSON.

const SCOPE = "JSInput";

export function installPlatform(lms, channel, quiz) {
  const platform = { lms, height: null, calls: [] };
  if (lms === "canvas") {
    platform.height = (height) => channel.postRaw({ subject: "lti.frameResize", height });
  } else if (lms === "edx" && quiz) {
    installJsInput(platform, channel, quiz);
  }
  return platform;
}

function installJsInput(platform, channel, quiz) {
  const methods = {
    getGrade: () => JSON.stringify(quiz.grade()),
    getState: () => JSON.stringify(quiz.state()),
    setState: (text) => {
      let saved;
      try {
        saved = JSON.parse(typeof text === "string" ? text : String(text));
      } catch {
        throw new Error(`The saved state is not JSON: ${String(text).slice(0, 60)}`);
      }
      const errors = quiz.restore(saved);
      if (errors.length) throw new Error(errors.map((e) => e.message).join(" "));
      return true;
    },
  };
  // On the platform's own origin it calls these directly, and passes the state it gets through
  // unescape(), so a "%" typed into an answer goes out as "%25" to come back as it was.
  Object.assign(window, { ...methods, getState: () => methods.getState().replaceAll("%", "%25") });

  const send = (message) => channel.postRaw(JSON.stringify(message));
  channel.listenOthers((data) => {
    if (typeof data !== "string") return false;
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      return false;
    }
    if (!m || typeof m !== "object" || typeof m.method !== "string" || !m.method.startsWith(`${SCOPE}::`)) return false;
    const name = m.method.slice(SCOPE.length + 2);
    if (name === "__ready") {
      if (m.params === "ping") send({ method: `${SCOPE}::__ready`, params: "pong" });
      platform.ready = true;
      return true;
    }
    if (m.id === undefined) return true; // a notification: nothing to answer
    platform.calls.push(name);
    const method = Object.hasOwn(methods, name) ? methods[name] : null;
    if (!method) {
      send({ id: m.id, error: "method_not_found", message: `The widget has no method ${name}; it has getGrade, getState and setState.` });
      return true;
    }
    try {
      const result = method(m.params);
      send({ id: m.id, result: typeof result === "string" ? encodeURI(result) : result });
    } catch (err) {
      send({ id: m.id, error: "runtime_error", message: err.message || String(err) });
    }
    return true;
  });
  // Say we are here; a platform that built its channel first answers "pong".
  send({ method: `${SCOPE}::__ready`, params: "ping" });
}
