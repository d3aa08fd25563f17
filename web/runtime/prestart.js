// Starts the lesson's Python worker as the page's first script, before app.js and its modules
// have loaded; app.js's supervisor takes it over (supervisor.js, prestart).
import { prestart } from "./supervisor.js";

prestart(new URL("./worker.js", import.meta.url));
