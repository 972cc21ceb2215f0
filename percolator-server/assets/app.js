// The search page's script (served as /app.js, loaded with `defer`: the page has no inline
// script or event handler attribute, for its Content-Security-Policy).
//
// Everything a page supplies (titles, snippets, URLs) is put in the DOM as text
// (`textContent`, text nodes), never parsed as HTML; a hit is a link only when its URL is an
// http: or https: URL.
"use strict";

const PAGE = 10;
// The longest wait a busy server's Retry-After gets before the one retry.
const MAX_RETRY_SECONDS = 10;
const $ = (id) => document.getElementById(id);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

// An element with a class and text content (as text, never as HTML).
function text(tag, className, content) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (content !== undefined) el.textContent = content;
  return el;
}

// The snippet with its highlights (UTF-8 byte ranges) wrapped in <mark>.
function snippetNode(snippet) {
  const div = text("div", "snippet");
  const bytes = encoder.encode((snippet && snippet.text) || "");
  let at = 0;
  for (const [start, end] of (snippet && snippet.highlights) || []) {
    div.append(decoder.decode(bytes.slice(at, start)));
    div.append(text("mark", "", decoder.decode(bytes.slice(start, end))));
    at = end;
  }
  div.append(decoder.decode(bytes.slice(at)));
  return div;
}

// `url` as an href if it is an http: or https: URL; null for anything else (javascript:,
// data:, a relative or unparseable URL), which is then shown as text only.
function linkTarget(url) {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
  } catch (e) {
    // Not a URL.
  }
  return null;
}

// One hit: its title (a link to it when its URL may be opened), its URL, score and snippet.
function hitNode(hit) {
  const li = text("li", "hit");
  const title = hit.title || hit.url;
  const href = linkTarget(hit.url);
  let head;
  if (href === null) {
    head = text("span", "title", title);
  } else {
    head = text("a", "", title);
    head.href = href;
  }
  li.append(head, text("div", "url", hit.url),
    text("div", "meta", `score ${Number(hit.score).toFixed(2)} · ${hit.inlinks} inlinks`),
    snippetNode(hit.snippet));
  return li;
}

function seconds(s) {
  if (s < 1) return (s * 1000).toFixed(0) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  return (s / 60).toFixed(1) + " min";
}

const sleep = (secs) => new Promise((resolve) => setTimeout(resolve, secs * 1000));

// What an error response says: the API's {"error": {"kind", "message"}} (or a plain
// {"error": "message"}); for a body that is not that (a proxy's error page), the HTTP status.
async function errorMessage(response) {
  let error = null;
  try {
    const body = JSON.parse(await response.text());
    error = body && body.error;
  } catch (e) {
    error = null;
  }
  if (error && typeof error.message === "string" && error.message) return error.message;
  if (typeof error === "string" && error) return error;
  return `HTTP ${response.status}${response.statusText ? " " + response.statusText : ""}`;
}

// How long a busy server (503, 429) asks to be left alone: its Retry-After, in seconds or as
// an HTTP date, at most MAX_RETRY_SECONDS; null when it is not busy or says nothing.
function retryAfter(response) {
  if (response.status !== 503 && response.status !== 429) return null;
  const value = (response.headers.get("Retry-After") || "").trim();
  if (!value) return null;
  let secs = Number(value);
  if (!Number.isFinite(secs)) {
    const at = Date.parse(value);
    if (Number.isNaN(at)) return null;
    secs = (at - Date.now()) / 1000;
  }
  return Math.min(MAX_RETRY_SECONDS, Math.max(0, secs));
}

// GETs `url` and returns its JSON body. A busy server's answer (503 or 429 with Retry-After)
// is retried once after the wait, which `onBusy(seconds)` is told first; an error is thrown
// with what the server said.
async function getJson(url, onBusy) {
  let response = await fetch(url);
  const wait = retryAfter(response);
  if (wait !== null && onBusy) {
    onBusy(wait);
    await sleep(wait);
    response = await fetch(url);
  }
  if (!response.ok) {
    const message = await errorMessage(response);
    throw new Error(retryAfter(response) === null ? message : `the server is busy: ${message}`);
  }
  try {
    return await response.json();
  } catch (e) {
    throw new Error(`HTTP ${response.status}: the answer is not JSON`);
  }
}

// The latest search: an older one still waiting (on a busy server) does not overwrite it.
let latestSearch = 0;

// The address of a search's page of results: what a reload, a shared link, Back and Forward
// come back to.
function searchUrl(q, any, offset) {
  return "?" + new URLSearchParams({ q, any: any ? 1 : 0, offset });
}

// Shows page `offset` of the results for `q`. `how` is "push" for a new search or a page turn
// (a history entry of its own, so that Back and Forward move between pages), "replace" when
// the address already says it (a loaded URL, Back, Forward).
async function search(q, any, offset, how) {
  const mine = ++latestSearch;
  const state = { q, any, offset };
  if (how === "push") {
    history.pushState(state, "", searchUrl(q, any, offset));
  } else {
    history.replaceState(state, "", searchUrl(q, any, offset));
  }
  $("q").value = q;
  $("any").checked = any;
  const params = new URLSearchParams({ q, mode: any ? "any" : "all", limit: PAGE, offset });
  const hits = $("hits"), pager = $("pager"), summary = $("summary");
  try {
    const body = await getJson("/api/search?" + params, (wait) => {
      if (mine !== latestSearch) return;
      summary.replaceChildren(text("span", "busy",
        `The server is busy; trying again in ${Math.ceil(wait)} s…`));
    });
    if (mine !== latestSearch) return;
    hits.replaceChildren();
    pager.replaceChildren();
    const shown = body.hits.length;
    summary.textContent = `${body.total} of ${body.documents} documents contain ` +
      `${body.mode === "any" ? "any" : "all"} of: ${body.terms.join(" ")}` +
      (shown ? ` — showing ${offset + 1}–${Math.min(offset + PAGE, body.total)}` : "") +
      (body.scored < body.total
        ? ` (the best ${body.scored} by text ranked with anchors and inlinks, the rest by text)`
        : "");
    for (const hit of body.hits) {
      hits.append(hitNode(hit));
    }
    hits.dataset.offset = offset;
    if (offset > 0) {
      const prev = text("button", "prev", "← previous");
      prev.type = "button";
      prev.addEventListener("click", () => search(q, any, Math.max(0, offset - PAGE), "push"));
      pager.append(prev);
    }
    // Pages are slices of one order of `total` matches (a page may show fewer hits, when a
    // match cannot be shown), so the next page starts PAGE further on.
    if (offset + PAGE < body.total) {
      const next = text("button", "next", "next →");
      next.type = "button";
      next.addEventListener("click", () => search(q, any, offset + PAGE, "push"));
      pager.append(next);
    }
  } catch (e) {
    if (mine !== latestSearch) return;
    hits.replaceChildren();
    pager.replaceChildren();
    summary.replaceChildren(text("span", "error", "Search failed: " + e.message));
  }
}

// The search an address asks for (`?q=…&any=1&offset=20`), or null.
function searchOf(params) {
  const q = (params.get("q") || "").trim();
  if (!q) return null;
  const offset = Number.parseInt(params.get("offset") || "0", 10);
  return {
    q,
    any: params.get("any") === "1",
    offset: Number.isFinite(offset) && offset > 0 ? offset : 0,
  };
}

async function refreshStatus() {
  try {
    const s = await getJson("/api/status", null);
    $("s-documents").textContent = s.documents;
    $("s-pending").textContent = s.pending;
    $("s-rate").textContent = s.processed_per_sec.toFixed(1);
    $("s-processed").textContent = s.processed;
    $("s-freshness").textContent = s.freshness_samples
      ? `${seconds(s.freshness_p50_secs)} / ${seconds(s.freshness_p99_secs)}` : "no pages yet";
    $("s-searches").textContent = `${s.searches}, ${s.search_p50_ms.toFixed(1)} ms`;
    $("s-uptime").textContent = seconds(s.uptime_secs);
    $("status").dataset.loaded = "1";
    $("status").removeAttribute("title");
  } catch (e) {
    $("s-pending").textContent = "unavailable";
    $("status").title = e.message;
  }
}

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const q = $("q").value.trim();
  if (q) search(q, $("any").checked, 0, "push");
});

// Back and Forward: show the page the entry names.
window.addEventListener("popstate", () => {
  const wanted = searchOf(new URLSearchParams(location.search));
  if (wanted) {
    search(wanted.q, wanted.any, wanted.offset, "replace");
  } else {
    latestSearch++;
    $("q").value = "";
    $("hits").replaceChildren();
    $("pager").replaceChildren();
    $("summary").replaceChildren();
  }
});

// A loaded, reloaded or shared address shows the page it names.
const initial = searchOf(new URLSearchParams(location.search));
if (initial) search(initial.q, initial.any, initial.offset, "replace");
refreshStatus();
setInterval(refreshStatus, 2000);
