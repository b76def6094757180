// The dashboard's entry point: login (a one-time link's code, or a token typed in), the
// header, and the router (by URL fragment).
import { ApiError, discover, get, live, redeemLoginCode, setToken, token } from "./api.js";
import { showOverview } from "./overview.js";
import { showObject } from "./object.js";
import { showGraph } from "./graph.js";
import { showTimeline } from "./timeline.js";

const main = document.getElementById("main");
const login = document.getElementById("login");
const state = { kinds: null, cleanup: null };

function showLogin(message) {
  login.classList.remove("hidden");
  main.replaceChildren();
  document.getElementById("logout").classList.add("hidden");
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("token").focus();
}

async function start(loginError) {
  if (loginError) { showLogin(loginError); return; }
  try {
    await get("/version");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) { showLogin(token() ? "That token is not valid." : ""); return; }
    throw e;
  }
  login.classList.add("hidden");
  document.getElementById("logout").classList.toggle("hidden", !token());
  state.kinds = await discover();
  live.onStatus((text) => {
    const badge = document.getElementById("live");
    badge.textContent = text;
    badge.className = `live status-${text}`;
  });
  await live.start("");
  window.addEventListener("hashchange", route);
  route();
}

function route() {
  if (state.cleanup) state.cleanup();
  state.cleanup = null;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = parts[0] || "overview";
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === page);
  main.replaceChildren();
  const ctx = { main, kinds: state.kinds };
  if (page === "object") state.cleanup = showObject(ctx, parts[1], parts[2] === "_" ? "" : parts[2], parts[3]);
  else if (page === "graph") state.cleanup = showGraph(ctx, parts[1] ? `${parts[1]}/${parts[2] === "_" ? "" : parts[2]}/${parts[3]}` : "");
  else if (page === "timeline") state.cleanup = showTimeline(ctx);
  else state.cleanup = showOverview(ctx);
}

login.addEventListener("submit", (event) => {
  event.preventDefault();
  setToken(document.getElementById("token").value.trim());
  start(null);
});
document.getElementById("logout").addEventListener("click", () => { setToken(""); location.reload(); });

redeemLoginCode().then(start).catch((e) => { main.replaceChildren(); main.append(`error: ${e.message}`); });
