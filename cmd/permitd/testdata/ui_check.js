// ui_check.js: drives permitd's status page (/ui) in headless chromium
// through playwright-core, for cmd/permitd's TestStatusPageInABrowser.
// Its one argument is a JSON object:
//   {"chromium": PATH, "cluster": [{"id", "url", "pid"}...] (a plain
//    3-node cluster), "tokens": {"url", "restricted", "readable": [...],
//    "hidden": [...]} (an agent with --token-file; the restricted token's
//    secret, the limits it may read and those it may not)}
// It prints what it checks and exits 1 at the first failure.
"use strict";
const { chromium } = require("playwright-core");

const cfg = JSON.parse(process.argv[2]);
const t0 = Date.now();
const log = (msg) => console.log(((Date.now() - t0) / 1000).toFixed(2) + "s " + msg);

function fail(msg) {
  throw new Error(msg);
}

async function api(method, url, body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

// watch collects the page's console errors and uncaught exceptions.
function watch(page, allowed) {
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error" && !allowed.some((re) => re.test(m.text()))) errors.push("console: " + m.text());
  });
  page.on("pageerror", (e) => errors.push("exception: " + e.message));
  return errors;
}

function noErrors(errors, phase) {
  if (errors.length > 0) fail(phase + ": " + errors.length + " console errors: " + errors.join(" | "));
  log(phase + ": no console errors");
}

const cellText = (page, limit, col) =>
  page.evaluate(([l, c]) => {
    const tr = document.querySelector('#limits tr[data-limit="' + l + '"]');
    return tr ? tr.cells[c].textContent : null;
  }, [limit, col]);

// Columns of #limits (a family row says its keys in the last).
const COL_GRANTED = 5, COL_INFLIGHT = 8, COL_OPEN = 9, COL_FAMILY_KEYS = 10;

async function waitCell(page, limit, col, want, ms, what) {
  const start = Date.now();
  try {
    await page.waitForFunction(([l, c, w]) => {
      const tr = document.querySelector('#limits tr[data-limit="' + l + '"]');
      return tr && tr.cells[c].textContent === w;
    }, [limit, col, want], { timeout: ms, polling: 50 });
  } catch (e) {
    fail(what + ": not " + JSON.stringify(want) + " within " + ms + " ms (shows " + JSON.stringify(await cellText(page, limit, col)) + ")");
  }
  log(what + ": " + JSON.stringify(want) + " after " + (Date.now() - start) + " ms");
}

// waitFamily waits for the family row of template to show, in column
// col, text matching re.
async function waitFamily(page, template, col, re, ms, what) {
  const start = Date.now();
  try {
    await page.waitForFunction(([p, c, src]) => {
      const tr = document.querySelector('#limits tr[data-family="' + p + '"]');
      return tr && new RegExp(src).test(tr.cells[c].textContent);
    }, [template, col, re.source], { timeout: Math.max(ms, 1), polling: 50 });
  } catch (e) {
    const shown = await page.evaluate(([p, c]) => {
      const tr = document.querySelector('#limits tr[data-family="' + p + '"]');
      return tr ? tr.cells[c].textContent : "no family row";
    }, [template, col]);
    fail(what + ": not " + re + " within " + ms + " ms (shows " + JSON.stringify(shown) + ")");
  }
  log(what + ": " + re + " after " + (Date.now() - start) + " ms");
}

async function leaderOf(nodes) {
  for (const n of nodes) {
    try {
      const r = await api("GET", n.url + "/v1/status");
      if (r.status === 200 && r.body.state === "leader" && r.body.ready) return r.body.id;
    } catch (e) { /* killed or not up */ }
  }
  return "";
}

async function clusterScenario(browser) {
  const nodes = cfg.cluster;
  const leader = await leaderOf(nodes);
  if (!leader) fail("no ready leader");
  const follower = nodes.find((n) => n.id !== leader);
  const L = nodes.find((n) => n.id === leader);
  const page = await browser.newPage();
  const errors = watch(page, []);
  await page.goto(follower.url + "/ui");
  log("opened " + follower.id + "/ui (the leader is " + leader + ")");
  await page.waitForFunction((id) => {
    const e = document.getElementById("leader");
    return e && e.textContent === id;
  }, leader, { timeout: 5000 });
  log("leader " + leader + " shown");

  for (const [name, spec] of [["api", { algorithm: "bursty", rate: 1000, per: "1s", max_burst_seconds: 10 }],
    ["cap", { algorithm: "concurrency", max_in_flight: 4, ttl: "1m" }]]) {
    const r = await api("PUT", follower.url + "/v1/limits/" + name, spec);
    if (r.status !== 201 && r.status !== 200) fail("put " + name + ": " + r.status + " " + JSON.stringify(r.body));
  }
  await waitCell(page, "api", COL_GRANTED, "0", 3000, "new limit api shown");

  // Reserves, then the page's numbers within 2 s.
  let sent = Date.now();
  for (let i = 0; i < 5; i++) {
    const r = await api("POST", follower.url + "/v1/limits/api/reserve", { permits: 2, request_id: "ui-" + i });
    if (r.status !== 200) fail("reserve: " + r.status + " " + JSON.stringify(r.body));
  }
  await waitCell(page, "api", COL_GRANTED, "10", 2000 - (Date.now() - sent), "granted permits of api after 5 reserves of 2");
  sent = Date.now();
  const rv = await api("POST", follower.url + "/v1/reserve", { limits: [{ name: "cap", permits: 3 }, { name: "api", permits: 1 }], request_id: "ui-multi" });
  if (rv.status !== 200) fail("multi reserve: " + rv.status + " " + JSON.stringify(rv.body));
  await waitCell(page, "cap", COL_INFLIGHT, "3 / 4", 2000 - (Date.now() - sent), "in-flight permits of cap");
  await waitCell(page, "cap", COL_OPEN, "1", 2000 - (Date.now() - sent), "open reservations of cap");
  const rate = Number(await cellText(page, "api", 2));
  if (!(rate > 0)) fail("granted /s of api is " + rate + " after grants");
  log("granted /s of api shows " + rate);

  // A template: keys created by reserves are one family row with their
  // count and summed counters, never a row per key.
  const tp = await api("PUT", follower.url + "/v1/templates/cust", { algorithm: "bursty", rate: 10, per: "1s", idle: "10m", max_keys: 50 });
  if (tp.status !== 201) fail("put template cust: " + tp.status + " " + JSON.stringify(tp.body));
  sent = Date.now();
  for (const key of ["alice", "bob", "carol"]) {
    const r = await api("POST", follower.url + "/v1/limits/cust:" + key + "/reserve", { permits: 2 });
    if (r.status !== 200) fail("reserve cust:" + key + ": " + r.status + " " + JSON.stringify(r.body));
  }
  await waitFamily(page, "cust", COL_FAMILY_KEYS, /^3 keys of at most 50, idle after 600 s$/, 2000 - (Date.now() - sent), "family row of cust after reserves on 3 new keys");
  await waitFamily(page, "cust", COL_GRANTED, /^6$/, 2000 - (Date.now() - sent), "granted permits of the cust family");
  const keyRows = await page.$$eval("#limits tbody tr", (trs) => trs.filter((tr) => (tr.dataset.limit || "").startsWith("cust:")).length);
  if (keyRows !== 0) fail(keyRows + " rows for keys of cust, want none (one family row)");
  log("no row per key of cust");
  noErrors(errors, "cluster page");

  // Kill the leader: the page (on a follower) shows the new one.
  process.kill(L.pid, "SIGKILL");
  const killed = Date.now();
  log("killed the leader " + leader);
  // Until a new leader is elected, reads through the leader answer 503
  // (shown on the page, and logged by chromium as failed loads).
  errors.length = 0;
  const survivors = nodes.filter((n) => n.id !== leader);
  try {
    await page.waitForFunction((old) => {
      const e = document.getElementById("leader");
      return e && e.textContent !== old && e.textContent !== "none known";
    }, leader, { timeout: 15000, polling: 50 });
  } catch (e) {
    fail("no new leader shown within 15 s of the kill (shows " + await page.textContent("#leader") + ")");
  }
  const shown = await page.textContent("#leader");
  if (!survivors.some((n) => n.id === shown)) fail("the page shows leader " + shown + ", not a survivor");
  log("new leader " + shown + " shown " + (Date.now() - killed) + " ms after the kill");
  const real = await leaderOf(survivors);
  if (real && real !== shown) fail("the page shows leader " + shown + ", the cluster says " + real);
  const unexpected = errors.filter((e) => !/status of 503/.test(e));
  noErrors(unexpected, "page across the leader kill (503s while no leader aside)");
  await page.close();
}

async function tokenScenario(browser) {
  const tk = cfg.tokens;
  const page = await browser.newPage();
  // The page's calls without a valid token are answered 401, which
  // chromium logs as failed loads: expected here, nothing else is.
  const errors = watch(page, [/status of 401/]);
  await page.goto(tk.url + "/ui");
  await page.waitForSelector("#token-form", { state: "visible", timeout: 5000 });
  if (await page.isVisible("#data")) fail("data shown without a token");
  const why = await page.textContent("#token-why");
  if (!/401/.test(why)) fail("the token prompt does not say 401: " + why);
  log("token prompt shown: " + why);

  await page.fill("#token", "pmt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
  await page.click("#token-form button[type=submit]");
  await page.waitForFunction(() => /refused this token \(401\)/.test(document.getElementById("token-why").textContent), null, { timeout: 5000 });
  log("a wrong token: " + await page.textContent("#token-why"));

  await page.fill("#token", tk.restricted);
  await page.click("#token-form button[type=submit]");
  await page.waitForSelector("#data", { state: "visible", timeout: 5000 });
  await page.waitForFunction((n) => document.querySelectorAll("#limits tbody tr").length === n, tk.readable.length, { timeout: 5000 });
  const shown = await page.$$eval("#limits tbody tr", (trs) => trs.map((tr) => tr.dataset.limit));
  if (JSON.stringify(shown) !== JSON.stringify(tk.readable)) fail("the restricted token sees " + JSON.stringify(shown) + ", want " + JSON.stringify(tk.readable));
  const html = await page.content();
  for (const h of tk.hidden) if (html.includes(h)) fail("the page shows the limit " + h + " the token may not read");
  if (html.includes(tk.restricted)) fail("the page shows the token's secret");
  log("the restricted token sees only " + JSON.stringify(shown));
  const stored = await page.evaluate(() => sessionStorage.getItem("permitd-token"));
  if (stored !== tk.restricted) fail("the token is not in sessionStorage");
  noErrors(errors, "token page (401s before the token aside)");
  await page.close();
}

(async () => {
  const browser = await chromium.launch({ executablePath: cfg.chromium, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    if (cfg.tokens) await tokenScenario(browser);
    if (cfg.cluster) await clusterScenario(browser);
  } finally {
    await browser.close();
  }
  log("all checks passed");
})().catch((e) => {
  console.error("FAIL: " + e.message);
  process.exit(1);
});
