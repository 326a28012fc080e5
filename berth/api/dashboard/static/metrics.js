// Rates over the last minutes from the counters of /metrics: each poll is a sample, and a rate is the
// difference of two samples' counters over the time between them (counters only grow, except when
// the server restarts, which shows as a fall and starts the window again).

const WINDOW_MS = 5 * 60 * 1000;
// The dashboard's own polling is left out, so that the figures are the API's clients'.
const OWN_ROUTES = ["/metrics", "/dashboard", "/berth/dashboard"];
// And the reads the page polls under another API's route: the quotas panel's list of every
// project's limits (an API client's reads of one project's quotas are other routes).
const OWN_READS = ["GET /berth/quotas"];

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text) {
  const series = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = LINE.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, name, value] of (match[3] || "").matchAll(LABEL)) {
      labels[name] = value.replace(/\\"/g, '"').replace(/\\n/g, "\n").replace(/\\\\/g, "\\");
    }
    series.push({ name: match[1], labels, value: Number(match[4]) });
  }
  return series;
}

function isOwn(route, method) {
  if (OWN_READS.includes(`${method} ${route}`)) return true;
  return OWN_ROUTES.some((prefix) => route === prefix || route?.startsWith(prefix + "/"));
}

// One poll's totals: requests, conflicts by code, and the latency histogram summed over API routes.
export function sampleOf(series, at) {
  const sample = { at, requests: 0, errors: 0, clientErrors: {}, conflicts: {}, sum: 0, count: 0, buckets: new Map() };
  for (const { name, labels, value } of series) {
    if (name === "berth_allocation_conflicts_total") {
      // Placement gives a write that does not fit no code of its own: the reason names it.
      const key = labels.reason || labels.code || "unknown";
      sample.conflicts[key] = (sample.conflicts[key] || 0) + value;
      continue;
    }
    if (!name.startsWith("berth_http_request") || isOwn(labels.route, labels.method)) continue;
    if (name === "berth_http_requests_total") {
      sample.requests += value;
      const status = Number(labels.status);
      if (status >= 500) sample.errors += value;
      else if (status >= 400) sample.clientErrors[labels.status] = (sample.clientErrors[labels.status] || 0) + value;
    } else if (name === "berth_http_request_duration_seconds_sum") {
      sample.sum += value;
    } else if (name === "berth_http_request_duration_seconds_count") {
      sample.count += value;
    } else if (name === "berth_http_request_duration_seconds_bucket") {
      const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
      sample.buckets.set(le, (sample.buckets.get(le) || 0) + value);
    }
  }
  return sample;
}

function conflictTotal(sample) {
  return Object.values(sample.conflicts).reduce((a, b) => a + b, 0);
}

// The quantile q of the requests between two samples, interpolated within its bucket.
function quantile(q, first, last) {
  const bounds = [...last.buckets.keys()].sort((a, b) => a - b);
  const total = last.count - first.count;
  if (total <= 0 || bounds.length === 0) return null;
  const rank = q * total;
  let below = 0;
  let lower = 0;
  for (const bound of bounds) {
    const cumulative = last.buckets.get(bound) - (first.buckets.get(bound) || 0);
    if (cumulative >= rank) {
      if (bound === Infinity) return lower;
      const inBucket = cumulative - below;
      return inBucket > 0 ? lower + ((bound - lower) * (rank - below)) / inBucket : bound;
    }
    below = cumulative;
    lower = bound;
  }
  return lower;
}

export class MetricsWindow {
  constructor() {
    this.samples = [];
  }

  add(sample) {
    const last = this.samples[this.samples.length - 1];
    if (last && (sample.requests < last.requests || sample.count < last.count)) this.samples = [];
    this.samples.push(sample);
    while (this.samples.length > 2 && sample.at - this.samples[0].at > WINDOW_MS) this.samples.shift();
  }

  // Figures over the window, or null before two samples.
  figures() {
    if (this.samples.length < 2) return null;
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const seconds = (last.at - first.at) / 1000;
    const requests = last.requests - first.requests;
    const conflicts = conflictTotal(last) - conflictTotal(first);
    const byCode = {};
    for (const [code, value] of Object.entries(last.conflicts)) {
      const delta = value - (first.conflicts[code] || 0);
      if (delta > 0) byCode[code] = delta;
    }
    const byStatus = {};
    for (const [status, value] of Object.entries(last.clientErrors)) {
      const delta = value - (first.clientErrors[status] || 0);
      if (delta > 0) byStatus[status] = delta;
    }
    const timed = last.count - first.count;
    const perInterval = [];
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1];
      const b = this.samples[i];
      perInterval.push((b.requests - a.requests) / Math.max((b.at - a.at) / 1000, 0.001));
    }
    return {
      seconds,
      requests,
      requestRate: requests / seconds,
      errors: last.errors - first.errors,
      clientErrors: Object.values(byStatus).reduce((a, b) => a + b, 0),
      clientErrorsByStatus: byStatus,
      conflicts,
      conflictsPerMinute: (conflicts * 60) / seconds,
      conflictShare: requests > 0 ? conflicts / requests : 0,
      conflictsByCode: byCode,
      meanLatency: timed > 0 ? (last.sum - first.sum) / timed : null,
      p50: quantile(0.5, first, last),
      p95: quantile(0.95, first, last),
      rateHistory: perInterval,
    };
  }
}
