// Requests to the service, with the token the page holds; every URL is relative to the page's base,
// the service's root.

const TOKEN_KEY = "berth.dashboard.token";

export class Refused extends Error {
  constructor(status) {
    super(status === 401 ? "token refused" : "not allowed");
    this.status = status;
  }
}

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export async function getJson(path, token) {
  const headers = { Accept: "application/json" };
  if (token) headers["X-Auth-Token"] = token;
  const response = await fetch(new URL(path, document.baseURI), { headers, cache: "no-store" });
  if (response.status === 401 || response.status === 403) throw new Refused(response.status);
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// The Prometheus text of /metrics, or null when the service does not offer it to this caller.
export async function getMetricsText(token) {
  const headers = { Accept: "text/plain" };
  if (token) headers["X-Auth-Token"] = token;
  const response = await fetch(new URL("metrics", document.baseURI), { headers, cache: "no-store" });
  if ([401, 403, 404].includes(response.status)) return null;
  if (!response.ok) throw new Error(`metrics: HTTP ${response.status}`);
  return response.text();
}

// The control plane as the conductors' API reports it (GET /berth/dashboard/control), read across
// origins with the page's token: the conductors must allow the service's origin.
export async function getControl(conductorUrl, token) {
  const headers = { Accept: "application/json" };
  if (token) headers["X-Auth-Token"] = token;
  const response = await fetch(`${conductorUrl}/berth/dashboard/control`, { headers, cache: "no-store" });
  if (response.status === 401 || response.status === 403) throw new Refused(response.status);
  if (!response.ok) throw new Error(`conductors: HTTP ${response.status}`);
  return response.json();
}
