// permitd's status page: polls this agent's JSON API once a second and
// renders it. Everything shown comes from the API with the token the
// operator gave (sessionStorage, this tab only); nothing is fetched from
// elsewhere. Text is always set with textContent, never parsed as HTML.
"use strict";

const REFRESH_MS = 1000;
const RATE_WINDOW_MS = 5000; // rates are measured over the last 5 s
const MAX_LEASED_VIEWS = 50; // leased limits whose leases one refresh reads
const TOKEN_KEY = "permitd-token";

const $ = (id) => document.getElementById(id);
const samples = new Map(); // limit name -> [{t, granted, refused}]

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// ApiError is an answer other than 2xx, or no answer at all (status 0).
class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function get(path) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  let resp;
  try {
    resp = await fetch(path, { headers, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "no answer from this agent (" + e.message + ")");
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    body = null;
  }
  if (!resp.ok) {
    const msg = body && body.error ? body.error : resp.statusText;
    throw new ApiError(resp.status, msg);
  }
  return body;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
  return tr;
}

function num(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return el("td", "–", "num");
  const s = typeof v === "number" && digits !== undefined ? v.toFixed(digits) : v.toLocaleString("en");
  return el("td", s, "num");
}

function showProblem(id, text) {
  const p = $(id);
  p.textContent = text || "";
  p.hidden = !text;
}

function askToken(why) {
  $("token-why").textContent = why;
  $("token-form").hidden = false;
  $("data").hidden = true;
}

function renderNode(st) {
  $("node-id").textContent = st.id ? "· " + st.id : "";
  const dl = $("node");
  dl.replaceChildren();
  const lag = st.commit_index - st.applied_index;
  const facts = [
    ["this node", st.id + " (" + st.state + ")"],
    ["leader", st.leader_id || "none known"],
    ["term", st.term],
    ["commit index", st.commit_index],
    ["applied index", st.applied_index],
    ["commit lag", lag + (lag === 1 ? " entry" : " entries")],
    ["ready", st.ready ? "yes" : "no"],
    ["last contact", st.state === "leader" ? "–" : (st.last_contact_ns / 1e6).toFixed(0) + " ms ago"],
    ["pending reserves", st.pending_reserves],
    ["shed reserves", st.shed_reserves],
    ["waiting reserves", st.waiting_reserves],
    ["snapshot index", st.last_snapshot_index],
  ];
  for (const [k, v] of facts) {
    dl.appendChild(el("dt", k));
    const dd = el("dd", v);
    if (k === "leader") {
      dd.id = "leader";
      if (!st.leader_id) dd.className = "bad";
    }
    if (k === "commit lag" && lag > 100) dd.className = "warn";
    if (k === "ready" && !st.ready) dd.className = "bad";
    dl.appendChild(dd);
  }
}

function renderMembers(cl) {
  const tbody = $("members").tBodies[0];
  tbody.replaceChildren();
  for (const s of cl.servers || []) {
    const role = s.leader ? el("td", "leader", "leader") : el("td", s.id === cl.leader_id ? "leader" : "follower");
    let http = el("td", s.http_addr || "–");
    if (s.http_addr) {
      http = document.createElement("td");
      const a = el("a", s.http_addr);
      a.href = location.protocol + "//" + s.http_addr + "/ui";
      http.appendChild(a);
    }
    const p = s.promotion;
    const promo = p ? p.state + (p.reason ? ": " + p.reason : "") : "–";
    const tr = row([el("td", s.id), role, s.voter ? "yes" : "no (joining)", s.raft_addr, http, promo]);
    tr.dataset.member = s.id;
    tbody.appendChild(tr);
  }
}

// rates records a sample of a limit's counters and returns its granted
// permits and refused requests per second over the last RATE_WINDOW_MS
// (null until two samples exist).
function rates(l, now) {
  let s = samples.get(l.name);
  if (!s || (s.length > 0 && l.granted_permits < s[s.length - 1].granted)) {
    s = []; // new, or deleted and created again: start over
    samples.set(l.name, s);
  }
  s.push({ t: now, granted: l.granted_permits, refused: l.refused_requests });
  while (s.length > 2 && now - s[1].t >= RATE_WINDOW_MS) s.shift();
  if (s.length < 2) return { granted: null, refused: null };
  const first = s[0];
  const dt = (now - first.t) / 1000;
  return { granted: (l.granted_permits - first.granted) / dt, refused: (l.refused_requests - first.refused) / dt };
}

function configured(l) {
  if (l.algorithm === "concurrency") return null;
  return l.interval_ns > 0 ? 1e9 / l.interval_ns : null;
}

function groupsText(pool) {
  const groups = new Map();
  for (const ls of pool.leases || []) {
    const g = groups.get(ls.group) || { leases: 0, permits: 0, share: 0 };
    g.leases++;
    g.permits += ls.permits;
    g.share += ls.share_milli_per_sec / 1000;
    groups.set(ls.group, g);
  }
  if (groups.size === 0) return "no leases";
  return [...groups.entries()].sort().map(([name, g]) =>
    name + ": " + g.leases + (g.leases === 1 ? " lease, " : " leases, ") + g.permits + " permits, " + g.share.toFixed(1) + "/s").join("; ");
}

// familyRow renders a template's keys as one row: their number, each
// key's configured rate, and their counters summed (never a row per key).
function familyRow(f, now) {
  const r = rates({ name: "template " + f.template, granted_permits: f.granted_permits, refused_requests: f.refused_requests }, now);
  const what = f.keys + (f.keys === 1 ? " key" : " keys") + " of at most " + f.max_keys + ", idle after " +
    (f.idle_ns / 1e9).toFixed(0) + " s" + (f.active ? "" : "; template deleted");
  const conf = configured(f);
  const tr = row([el("td", f.template + ":* (template)"), f.algorithm, num(r.granted, 1),
    el("td", conf === null ? "–" : conf.toFixed(1) + " per key", "num"), el("td", "–", "num"),
    num(f.granted_permits), num(f.refused_requests), num(r.refused, 1), el("td", "–", "num"), el("td", "–", "num"), what]);
  tr.dataset.family = f.template;
  return tr;
}

async function renderLimits(list, families, now) {
  const tbody = $("limits").tBodies[0];
  const leased = list.filter((l) => l.leased).slice(0, MAX_LEASED_VIEWS);
  const pools = new Map();
  await Promise.all(leased.map(async (l) => {
    try {
      pools.set(l.name, groupsText(await get("/v1/limits/" + encodeURIComponent(l.name) + "/leases")));
    } catch (e) {
      pools.set(l.name, e.status + ": " + e.message);
    }
  }));
  const rows = [];
  const seen = new Set();
  for (const l of list) {
    seen.add(l.name);
    const r = rates(l, now);
    const conf = configured(l);
    const use = r.granted !== null && conf ? (100 * r.granted / conf).toFixed(0) + " %" : "–";
    const inflight = l.algorithm === "concurrency" ? l.in_flight_permits + " / " + l.max_in_flight : "–";
    let leases = l.leased ? (pools.get(l.name) || "(not read: more than " + MAX_LEASED_VIEWS + " leased limits)") : "not leased";
    const name = el("td", l.name + (l.shadow ? " (shadow)" : ""));
    const tr = row([name, l.algorithm, num(r.granted, 1), num(conf, 1), el("td", use, "num"),
      num(l.granted_permits), num(l.refused_requests), num(r.refused, 1), el("td", inflight, "num"),
      num(l.open_reservations), leases]);
    tr.dataset.limit = l.name;
    rows.push(tr);
  }
  for (const f of families) {
    seen.add("template " + f.template);
    rows.push(familyRow(f, now));
  }
  for (const name of samples.keys()) if (!seen.has(name)) samples.delete(name);
  tbody.replaceChildren(...rows);
  const fams = families.length === 0 ? "" : ", " + families.length + (families.length === 1 ? " template" : " templates") + " of keys";
  $("limits-note").textContent = list.length + families.length === 0 ? "(none this token may read)" : "(" + list.length + fams + ")";
}

async function refresh() {
  let st, cl;
  try {
    [st, cl] = await Promise.all([get("/v1/status"), get("/v1/cluster")]);
  } catch (e) {
    if (e.status === 401) {
      askToken(token() ? "The agent refused this token (401): " + e.message : "This agent requires an API token (401): " + e.message);
    } else if (e.status === 403) {
      askToken("This token may not read the agent's status (403): " + e.message);
    } else {
      showProblem("problem", (e.status ? e.status + ": " : "") + e.message);
    }
    return;
  }
  showProblem("problem", "");
  $("token-form").hidden = true;
  $("data").hidden = false;
  $("forget-token").hidden = !token();
  renderNode(st);
  renderMembers(cl);
  const now = performance.now();
  try {
    const ls = await get("/v1/readable-limits");
    showProblem("limits-problem", "");
    await renderLimits(ls.limits || [], ls.families || [], now);
  } catch (e) {
    // A 503 while the cluster elects a leader: the last numbers stay.
    showProblem("limits-problem", "Limits: " + (e.status ? e.status + ": " : "") + e.message);
  }
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

async function loop() {
  try {
    await refresh();
  } catch (e) {
    showProblem("problem", "the page failed: " + e.message);
  }
  setTimeout(loop, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    $("token").value = "";
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
    samples.clear();
    refresh();
  });
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    samples.clear();
    refresh();
  });
  loop();
});
