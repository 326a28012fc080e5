// Drawing the figures into the page. Every value from the service goes in as text, never as markup.

const number = new Intl.NumberFormat("en-US");
const percent = new Intl.NumberFormat("en-US", { style: "percent", maximumFractionDigits: 1 });

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node[key] = value;
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

export function formatNumber(value) {
  return number.format(value);
}

// Over capacity (more used than may be allocated: an inventory shrunk below its use) is drawn apart
// from full, as it needs an operator where full does not.
export function level(used, capacity) {
  if (used > capacity) return "over";
  const share = capacity > 0 ? used / capacity : 0;
  return share >= 0.9 ? "full" : share >= 0.7 ? "warn" : "ok";
}

export function bar(used, capacity) {
  const share = capacity > 0 ? used / capacity : used > 0 ? 1 : 0;
  const fill = el("span");
  fill.style.width = `${Math.min(share, 1) * 100}%`;
  const over = used > capacity;
  const title = `${number.format(used)} of ${number.format(capacity)}${over ? " (over capacity)" : ""}`;
  return el("div", { class: `bar ${level(used, capacity)}`, title },
    fill, el("em", {}, over ? `${percent.format(share)} over` : percent.format(share)));
}

function fillBody(table, rows) {
  table.tBodies[0].replaceChildren(...rows);
}

// The cloud's counts and its capacity per class: what the page shows first.
export function renderTotals(totals) {
  document.getElementById("count-roots").textContent = number.format(totals.roots);
  document.getElementById("count-providers").textContent = number.format(totals.providers);
  document.getElementById("count-consumers").textContent = number.format(totals.consumers);
  const over = document.getElementById("count-over");
  over.textContent = `${number.format(totals.over_capacity)} ${totals.over_capacity === 1 ? "provider" : "providers"} over capacity`;
  over.dataset.count = String(totals.over_capacity);
  over.classList.toggle("alarm", totals.over_capacity > 0);
  fillBody(document.getElementById("classes"), totals.resource_classes.map((c) =>
    el("tr", { "data-class": c.resource_class, "data-capacity": c.capacity, "data-used": c.used, "data-free": c.free },
      el("td", {}, c.resource_class),
      el("td", { class: "num capacity" }, number.format(c.capacity)),
      el("td", { class: "num used" }, number.format(c.used)),
      el("td", { class: "num free" }, number.format(c.free)),
      el("td", {}, bar(c.used, c.capacity)))));
}

// The rankings, which cost the service the most to read, so they come after the totals.
export function renderRankings(rankings) {
  document.querySelector(".rankings").dataset.state = "live";
  // One row per host; the child whose inventory ranks it there is named within it.
  fillBody(document.getElementById("fullest"), rankings.fullest_providers.map((p) => {
    const host = el("td", { class: "name", title: p.id }, p.name);
    if (p.provider.id !== p.id) host.append(el("div", { class: "member", title: p.provider.id }, `› ${p.provider.name}`));
    return el("tr", { "data-id": p.id, "data-member": p.provider.id, "data-level": level(p.used, p.capacity) },
      host, el("td", {}, p.resource_class),
      el("td", { class: "num" }, `${number.format(p.used)} / ${number.format(p.capacity)}`),
      el("td", {}, bar(p.used, p.capacity)));
  }));
  // Consumers alike (one project, one flavor) come as one row with their count, each row its own.
  fillBody(document.getElementById("consumers"), rankings.biggest_consumers.map((c) =>
    el("tr", { "data-id": c.id, "data-consumers": c.consumers },
      el("td", { class: "uuid", title: c.id },
        c.consumers > 1 ? `${c.id.slice(0, 8)} +${number.format(c.consumers - 1)}` : c.id.slice(0, 8)),
      el("td", { class: "name" }, c.project_id ?? ""), el("td", {}, c.resource_class),
      el("td", { class: "num" }, c.consumers > 1 ? `${number.format(c.consumers)} × ${number.format(c.used)}` :
        number.format(c.used)),
      el("td", {}, bar(c.used, c.capacity)))));
  fillBody(document.getElementById("projects"), rankings.biggest_projects.map((p) =>
    el("tr", { "data-id": p.id },
      el("td", { class: "name" }, p.id), el("td", {}, p.resource_class), el("td", { class: "num" }, number.format(p.used)),
      el("td", {}, bar(p.used, p.capacity)))));
}

// Each project's limits (GET /berth/quotas), one row per limit, its usage against it.
export function renderQuotas(quotas) {
  const section = document.getElementById("quotas");
  section.dataset.state = "live";
  const rows = quotas.quotas.flatMap((q) => Object.entries(q.limits).map(([resource, limit]) => {
    const used = q.usage[resource] ?? 0;
    return el("tr", { "data-project": q.project_id, "data-resource": resource, "data-used": used, "data-limit": limit },
      el("td", { class: "name" }, q.project_id), el("td", {}, resource),
      el("td", { class: "num" }, `${number.format(used)} / ${number.format(limit)}`),
      el("td", {}, bar(used, limit)));
  }));
  fillBody(document.getElementById("quota-limits"), rows);
  document.getElementById("quotas-none").hidden = rows.length > 0;
}

function providerItem(node) {
  const inventories = el("div", { class: "inventories" });
  for (const inv of node.inventories) {
    inventories.append(
      el("span", {}, inv.resource_class),
      bar(inv.used, inv.capacity),
      el("span", { class: "figures inventory", "data-class": inv.resource_class, "data-used": inv.used,
        "data-capacity": inv.capacity }, `${number.format(inv.used)} / ${number.format(inv.capacity)}`));
  }
  const item = el("li", { class: "provider", "data-uuid": node.uuid, "data-name": node.name },
    el("div", { class: "provider-head" }, el("strong", {}, node.name), el("span", { class: "uuid" }, node.uuid)),
    inventories);
  if (node.children.length) item.append(el("ul", {}, ...node.children.map(providerItem)));
  return item;
}

export function renderProviders(page) {
  document.getElementById("provider-list").replaceChildren(...page.trees.map(providerItem));
  const shown = page.matched === 0 ? "no provider trees" :
    `page ${page.page} of ${page.pages} (${number.format(page.matched)} trees)`;
  document.getElementById("page-info").textContent = shown;
  document.getElementById("prev").disabled = page.page <= 1;
  document.getElementById("next").disabled = page.page >= page.pages;
}

function sparkline(values) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 100 28");
  svg.setAttribute("preserveAspectRatio", "none");
  if (values.length > 1) {
    const top = Math.max(...values, 1e-9);
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", values.map((v, i) =>
      `${(i * 100) / (values.length - 1)},${27 - (v / top) * 25}`).join(" "));
    svg.append(line);
  }
  return svg;
}

function tile(key, label, value, extra) {
  const node = el("div", { class: "metric", "data-metric": key }, el("div", { class: "label" }, label),
    el("div", { class: "value" }, value));
  if (extra) node.append(extra);
  return node;
}

function milliseconds(seconds) {
  return seconds === null ? "–" : `${number.format(Math.round(seconds * 10000) / 10)} ms`;
}

export function renderMetrics(state, figures) {
  const panel = document.getElementById("metrics");
  panel.dataset.state = state;
  if (state === "unavailable") {
    panel.replaceChildren(el("p", { class: "note" }, "metrics unavailable"));
    return;
  }
  if (!figures) {
    panel.replaceChildren(el("p", { class: "note" }, "waiting for two samples…"));
    return;
  }
  // A reason (capacity_exceeded) reads as words; a code (placement.concurrent_update) as the API answers it.
  const codes = Object.entries(figures.conflictsByCode)
    .map(([code, n]) => `${code.includes(".") ? code : code.replaceAll("_", " ")}: ${n}`)
    .join(", ");
  const statuses = Object.entries(figures.clientErrorsByStatus).map(([status, n]) => `${status}: ${n}`).join(", ");
  panel.replaceChildren(
    el("p", { class: "note" }, `over the last ${Math.round(figures.seconds)} s, the dashboard's own requests left out`),
    el("div", { class: "metric-grid" },
      tile("request-rate", "requests / s", figures.requestRate.toFixed(2), sparkline(figures.rateHistory)),
      tile("requests", "requests", number.format(figures.requests)),
      tile("latency-mean", "mean latency", milliseconds(figures.meanLatency)),
      tile("latency-p50", "p50 latency", milliseconds(figures.p50)),
      tile("latency-p95", "p95 latency", milliseconds(figures.p95)),
      tile("conflicts", "allocation conflicts / min", figures.conflictsPerMinute.toFixed(2),
        el("div", { class: "label" }, `${number.format(figures.conflicts)} (${percent.format(figures.conflictShare)}
          of requests)${codes ? " " + codes : ""}`)),
      tile("client-errors", "4xx answers", number.format(figures.clientErrors),
        el("div", { class: "label" }, statuses)),
      tile("errors", "5xx answers", number.format(figures.errors))));
}
