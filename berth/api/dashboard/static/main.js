// The dashboard: learn how to authenticate, then poll the cloud's totals, the page of providers shown,
// the rankings and /metrics every few seconds. The totals and the page of providers are drawn as soon
// as they come; the rankings (the service's slowest read), the metrics and the conductors' control
// plane (when the service names them) follow and hold nothing back.

import { Refused, forgetToken, getControl, getJson, getMetricsText, storeToken, storedToken } from "./api.js";
import { renderControl, renderControlUnavailable } from "./control.js";
import { MetricsWindow, parsePrometheus, sampleOf } from "./metrics.js";
import { renderMetrics, renderProviders, renderQuotas, renderRankings, renderTotals } from "./render.js";

const view = { page: 1, search: "", sort: "name", above: "" };
const metrics = new MetricsWindow();
let config = null;
let token = null;
let timer = null;
// Each refresh is numbered; only the newest schedules the next, so a search typed during a poll
// does not start a second polling loop.
let latest = 0;
// When the figures on screen were read; shown, and the figures greyed, while the service fails.
let lastGood = null;

function show(state, message) {
  document.body.dataset.state = state;
  document.getElementById("auth").hidden = state !== "token-needed";
  document.getElementById("refused").hidden = state !== "refused";
  document.getElementById("content").hidden = state !== "live";
  document.getElementById("sign-out").hidden = !config?.token_required || !token;
  if (message !== undefined) document.getElementById("status").textContent = message;
}

function providersPath() {
  const query = new URLSearchParams({ page: String(view.page), page_size: String(config.page_size) });
  if (view.search) query.set("q", view.search);
  if (view.sort !== "name") query.set("sort", view.sort);
  if (view.above !== "") query.set("above", view.above);
  return `berth/dashboard/providers?${query}`;
}

async function refreshMetrics() {
  const text = await getMetricsText(token);
  if (text === null) {
    renderMetrics("unavailable", null);
    return;
  }
  metrics.add(sampleOf(parsePrometheus(text), Date.now()));
  const figures = metrics.figures();
  renderMetrics(figures ? "live" : "waiting", figures);
}

async function refreshProviders() {
  const page = await getJson(providersPath(), token);
  if (page.page > page.pages && page.matched > 0) {
    view.page = page.pages;
    return refreshProviders();
  }
  renderProviders(page);
}

async function refreshRankings(run) {
  try {
    const rankings = await getJson("berth/dashboard/rankings", token);
    // A newer refresh may have started (a search, a page turn): its rankings are at least as new.
    if (run === latest) renderRankings(rankings);
  } catch (error) {
    if (error instanceof Refused) return refused(error);
    document.querySelector(".rankings").dataset.state = "error";
  }
}

async function refreshQuotas(run) {
  const section = document.getElementById("quotas");
  try {
    const quotas = await getJson("berth/quotas", token);
    section.hidden = false;
    if (run === latest) renderQuotas(quotas);
  } catch (error) {
    // The quotas have rules of their own (berth:quotas:list): a viewer they refuse sees the rest.
    if (error instanceof Refused) section.hidden = true;
    else section.dataset.state = "error";
  }
}

async function refreshControl(run) {
  if (!config.conductor_url) return;
  try {
    const control = await getControl(config.conductor_url, token);
    if (run === latest) renderControl(control);
  } catch (error) {
    // Another service: its refusal or absence leaves the service's own figures on screen.
    if (run === latest) renderControlUnavailable(error instanceof Refused ? "not allowed" : error.message);
  }
}

async function refresh() {
  clearTimeout(timer);
  const run = ++latest;
  try {
    const [totals] = await Promise.all([getJson("berth/dashboard/totals", token), refreshProviders()]);
    renderTotals(totals);
    lastGood = new Date();
    document.body.dataset.stale = "false";
    show("live", `updated ${lastGood.toLocaleTimeString()}`);
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes) + 1);
    // The figures above come first; the rankings and the metrics may be slower, or absent.
    refreshRankings(run);
    refreshQuotas(run);
    refreshControl(run);
    refreshMetrics().catch(() => renderMetrics("unavailable", null));
  } catch (error) {
    if (error instanceof Refused) return refused(error);
    if (document.body.dataset.state === "live") {
      // The old figures stay, greyed, with the time they were read.
      document.body.dataset.stale = "true";
      show("live", `service unreachable: figures as of ${lastGood.toLocaleTimeString()} (${error.message})`);
    } else {
      show("error", `refresh failed: ${error.message}`);
    }
  }
  if (run === latest) timer = setTimeout(refresh, config.refresh_seconds * 1000);
}

function refused(error) {
  // Nothing stays on screen for a caller the policy refuses.
  clearTimeout(timer);
  document.getElementById("provider-list").replaceChildren();
  if (error.status === 401 && config.token_required) {
    forgetToken();
    token = null;
    document.getElementById("auth-message").textContent = "That token was refused.";
    show("token-needed", "token refused");
  } else {
    show("refused", "not allowed");
  }
}

function start() {
  document.getElementById("control").hidden = !config.conductor_url;
  token = config.token_required ? storedToken() : storedToken() || config.development_token;
  if (!token && config.token_required) {
    show("token-needed", "a token is needed");
    document.getElementById("token").focus();
    return;
  }
  refresh();
}

function wire() {
  document.getElementById("auth").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("token");
    storeToken(input.value.trim());
    input.value = "";
    start();
  });
  document.getElementById("sign-out").addEventListener("click", () => {
    forgetToken();
    token = null;
    clearTimeout(timer);
    show("token-needed", "a token is needed");
  });
  let typing = null;
  document.getElementById("search").addEventListener("input", (event) => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      view.search = event.target.value.trim();
      view.page = 1;
      refresh();
    }, 250);
  });
  for (const [id, key] of [["sort", "sort"], ["above", "above"]]) {
    document.getElementById(id).addEventListener("change", (event) => {
      view[key] = event.target.value;
      view.page = 1;
      refresh();
    });
  }
  document.getElementById("prev").addEventListener("click", () => {
    view.page = Math.max(1, view.page - 1);
    refresh();
  });
  document.getElementById("next").addEventListener("click", () => {
    view.page += 1;
    refresh();
  });
}

async function main() {
  wire();
  config = await getJson("dashboard/config.json", null);
  start();
}

main().catch((error) => show("error", `cannot start: ${error.message}`));
