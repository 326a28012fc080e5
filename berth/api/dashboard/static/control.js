// The control plane's section: the conductors' hosts (the down ones first and marked), the servers on
// each, the operations in flight and the last that failed. Every value goes in as text.

import { el, formatNumber } from "./render.js";

function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

// The time alone for today's, the date too for older ones.
function time(iso) {
  if (!iso) return "";
  const moment = new Date(iso);
  return moment.toDateString() === new Date().toDateString() ? moment.toLocaleTimeString() : moment.toLocaleString();
}

function plural(n, one, many) {
  return `${formatNumber(n)} ${n === 1 ? one : many}`;
}

function fill(id, rows) {
  document.getElementById(id).tBodies[0].replaceChildren(...rows);
  const none = document.getElementById(`${id}-none`);
  if (none) none.hidden = rows.length > 0;
}

function hostRow(host) {
  const down = host.state === "down";
  const state = el("td", {}, el("span", { class: `badge ${host.state}` }, host.state));
  if (host.status === "disabled") {
    state.append(" ", el("span", { class: "badge disabled", title: host.disabled_reason ?? "" }, "disabled"));
  }
  return el("tr", { class: down ? "host-down" : "", "data-host": host.name, "data-state": host.state,
    "data-status": host.status, "data-servers": host.servers },
    el("td", { class: "name" }, host.name), el("td", { class: "name" }, host.zone ?? ""), state,
    el("td", { class: "num servers" }, formatNumber(host.servers)),
    el("td", { class: "num" }, `${formatNumber(host.last_heartbeat_seconds_ago)} s ago`));
}

export function renderControl(control) {
  const section = document.getElementById("control");
  section.dataset.state = "live";
  const totals = control.totals;
  const statuses = Object.entries(totals.servers_by_status).map(([status, n]) => `${formatNumber(n)} ${status}`)
    .join(", ");
  const counts = document.getElementById("control-counts");
  counts.replaceChildren(
    el("span", { id: "control-hosts-up" }, `${plural(totals.hosts_up, "host", "hosts")} up`), ", ",
    el("span", { id: "control-hosts-down", class: totals.hosts_down > 0 ? "alarm" : "",
      "data-count": totals.hosts_down }, `${formatNumber(totals.hosts_down)} down`), "; ",
    `${plural(totals.servers, "server", "servers")}${statuses ? ` (${statuses})` : ""}; `,
    `${plural(totals.operations_running, "operation", "operations")} running`);
  // The down hosts first: they are the ones that need an operator.
  const hosts = [...control.hosts].sort((a, b) => (a.state === "down" ? 0 : 1) - (b.state === "down" ? 0 : 1));
  fill("control-hosts", hosts.map(hostRow));
  fill("control-running", control.running.map((op) =>
    el("tr", { "data-id": op.id, "data-kind": op.kind },
      el("td", {}, op.kind), el("td", { class: "uuid", title: op.server_id }, shortId(op.server_id)),
      el("td", {}, op.step ?? "–"), el("td", {}, op.owner ?? "–"), el("td", {}, time(op.started)))));
  fill("control-failures", control.failures.map((op) =>
    el("tr", { "data-id": op.id, "data-kind": op.kind, "data-state": op.state },
      el("td", {}, op.state === "rolled_back" ? `${op.kind} (rolled back)` : op.kind),
      el("td", { class: "uuid", title: op.server_id }, shortId(op.server_id)),
      el("td", { class: "error", title: op.error ?? "" }, el("div", {}, op.error ?? "")),
      el("td", {}, time(op.ended)))));
}

// The conductors did not answer, or refused the token: the section says so, the rest of the page stays.
export function renderControlUnavailable(reason) {
  const section = document.getElementById("control");
  section.dataset.state = "error";
  document.getElementById("control-counts").textContent = `conductors unavailable: ${reason}`;
}
