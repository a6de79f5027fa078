"""The web page at `/`: plain HTML and a little JavaScript, no build step.

A question box, the retrieval mode (hybrid / keyword / vector), a retrieve-only switch, the
streamed answer with its citations (source, page, the passage on click), the refusal reason, and
for admin tokens a debug table of every hit's rank and score in each arm. English and Chinese.
The token is kept in the browser's localStorage; `#token=...` in the address sets it (the
fragment never reaches the server) and `?q=...&mode=...&retrieve_only=1&lang=zh` asks at once.
All document text is inserted as text, never as HTML.
"""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rag_pipeline</title>
<style>
  body { font: 15px/1.5 system-ui, "Noto Sans CJK SC", sans-serif; max-width: 980px; margin: 1.5em auto; padding: 0 1em; color: #1d2430; }
  header { display: flex; justify-content: space-between; align-items: baseline; gap: 1em; flex-wrap: wrap; }
  h1 { font-size: 1.3em; margin: 0; }
  form { display: flex; gap: .5em; flex-wrap: wrap; margin: 1em 0; align-items: center; }
  #q { flex: 1 1 420px; padding: .5em; font-size: 1em; }
  button { padding: .45em 1em; }
  #answer { white-space: pre-wrap; background: #f4f6fa; padding: .8em 1em; border-radius: 6px; min-height: 1.5em; }
  #refusal { color: #8a1c1c; background: #fdf0f0; padding: .6em 1em; border-radius: 6px; }
  .muted { color: #667085; font-size: .9em; }
  details { margin: .3em 0; } summary { cursor: pointer; }
  blockquote { margin: .3em 0 .6em 1em; padding-left: .8em; border-left: 3px solid #c7cfdc; white-space: pre-wrap; }
  table { border-collapse: collapse; width: 100%; font-size: .9em; } th, td { border: 1px solid #d6dbe4; padding: .25em .45em; text-align: left; vertical-align: top; }
  th { background: #eef1f6; }
  .hidden { display: none; }
  #token { width: 16em; }
</style>
</head>
<body>
<header>
  <h1 data-i18n="title">Ask the documents</h1>
  <div>
    <label><span data-i18n="token">Token</span> <input id="token" type="password" autocomplete="off"></label>
    <button id="lang" type="button">中文</button>
  </div>
</header>
<div id="who" class="muted"></div>
<form id="ask">
  <input id="q" name="q" autocomplete="off" data-i18n-placeholder="placeholder" placeholder="Ask a question…">
  <select id="mode" name="mode">
    <option value="hybrid" data-i18n="hybrid">hybrid</option>
    <option value="keyword" data-i18n="keyword">keyword</option>
    <option value="vector" data-i18n="vector">vector</option>
  </select>
  <label><input id="retrieve_only" type="checkbox"> <span data-i18n="retrieve_only">retrieve only</span></label>
  <button id="go" type="submit" data-i18n="ask">Ask</button>
</form>
<div id="error" class="hidden" style="color:#8a1c1c"></div>
<section id="answer_box" class="hidden">
  <h2 data-i18n="answer">Answer</h2>
  <div id="answer"></div>
  <div id="refusal" class="hidden"><strong data-i18n="refused">No answer:</strong> <span id="reason"></span></div>
  <h3 data-i18n="sources">Sources</h3>
  <div id="citations"></div>
  <div class="muted"><span data-i18n="generation">generation</span> <span id="generation"></span> · <span id="latency"></span> ms
    · <span id="feedback"><button type="button" data-rating="up" data-i18n="up">helpful</button> <button type="button" data-rating="down" data-i18n="down">not helpful</button></span></div>
</section>
<section id="hits_box" class="hidden">
  <h2><span data-i18n="passages">Passages</span> (<span id="hits_mode"></span>)</h2>
  <div id="hits"></div>
</section>
<section id="debug_box" class="hidden">
  <h2 data-i18n="debug">Debug: rank in each arm</h2>
  <table id="debug"><thead><tr>
    <th>#</th><th data-i18n="source">source</th><th>page</th><th>score</th>
    <th>dense #</th><th>dense score</th><th>keyword #</th><th>keyword score</th><th>keyword weight</th><th>rerank #</th>
  </tr></thead><tbody></tbody></table>
</section>
<script>
"use strict";
const L = {
  en: {title: "Ask the documents", token: "Token", placeholder: "Ask a question…", hybrid: "hybrid", keyword: "keyword", vector: "vector",
       retrieve_only: "retrieve only", ask: "Ask", answer: "Answer", refused: "No answer:", sources: "Sources", generation: "generation",
       passages: "Passages", debug: "Debug: rank in each arm", source: "source", page: "page", signed_in: "signed in as",
       no_token: "Enter your token first.", no_hits: "No passages you may read match.", thanks: "thanks", up: "helpful", down: "not helpful"},
  zh: {title: "向文档提问", token: "令牌", placeholder: "输入问题…", hybrid: "混合", keyword: "关键词", vector: "向量",
       retrieve_only: "仅检索", ask: "提问", answer: "回答", refused: "无法回答：", sources: "来源", generation: "索引版本",
       passages: "段落", debug: "调试：各路检索排名", source: "来源", page: "页", signed_in: "当前身份",
       no_token: "请先输入令牌。", no_hits: "没有你有权阅读的匹配段落。", thanks: "谢谢", up: "有帮助", down: "没帮助"},
};
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let lang = params.get("lang") ? (params.get("lang") === "zh" ? "zh" : "en") : ((navigator.language || "").startsWith("zh") ? "zh" : "en");
let isAdmin = false, lastRequest = null;

function t(key) { return (L[lang] || L.en)[key] || key; }
function applyLang() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((el) => { el.textContent = t(el.dataset.i18n); });
  document.querySelectorAll("[data-i18n-placeholder]").forEach((el) => { el.placeholder = t(el.dataset.i18nPlaceholder); });
  $("lang").textContent = lang === "zh" ? "English" : "中文";
}
function token() { return $("token").value.trim(); }
function headers() { return {"Content-Type": "application/json", "Authorization": "Bearer " + token()}; }
function show(id, on) { $(id).classList.toggle("hidden", !on); }
function fail(message) { $("error").textContent = message; show("error", true); }
function el(tag, text, attrs) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; Object.assign(e, attrs || {}); return e; }

async function post(path, body) {
  const r = await fetch(path, {method: "POST", headers: headers(), body: JSON.stringify(body)});
  if (!r.ok) { let m = r.status + ""; try { m += ": " + (await r.json()).error.message; } catch (e) {} throw new Error(m); }
  return r;
}

async function whoami() {
  if (!token()) return;
  const r = await fetch("/v1/status", {headers: headers()});
  if (!r.ok) { fail(r.status + ": " + ((await r.json()).error || {}).message); return; }
  const s = await r.json();
  isAdmin = s.you.admin;
  $("who").textContent = `${t("signed_in")} ${s.you.name} (${s.you.clearance}${isAdmin ? ", admin" : ""}) · ${t("generation")} ${s.served_generation}`;
}

function renderCitations(citations) {
  const box = $("citations"); box.replaceChildren();
  citations.forEach((c, i) => {
    const d = el("details"); d.className = "citation";
    const page = c.page ? `, ${t("page")} ${c.page}` : "";
    d.append(el("summary", `[${i + 1}] ${c.title} — ${c.source}${page}`), el("blockquote", c.text));
    box.append(d);
  });
}

function renderHits(hits, mode) {
  $("hits_mode").textContent = t(mode);
  const box = $("hits"); box.replaceChildren();
  if (!hits.length) box.append(el("p", t("no_hits"), {className: "muted"}));
  hits.forEach((h, i) => {
    const d = el("details"); d.className = "hit";
    const page = h.page ? `, ${t("page")} ${h.page}` : "";
    d.append(el("summary", `${i + 1}. ${h.title} — ${h.source}${page} (${h.score.toFixed(4)})`), el("blockquote", h.text));
    box.append(d);
  });
  show("hits_box", true);
  const body = $("debug").tBodies[0]; body.replaceChildren();
  if (isAdmin) {
    const fmt = (v) => (v === null || v === undefined) ? "–" : (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : String(v));
    hits.forEach((h, i) => {
      const tr = el("tr"); tr.className = "debug-row";
      [i + 1, h.source, h.page, h.score, h.dense_rank, h.dense_score, h.keyword_rank, h.keyword_score, h.keyword_weight, h.rerank_rank]
        .forEach((v) => tr.append(el("td", fmt(v))));
      body.append(tr);
    });
  }
  show("debug_box", isAdmin);
}

async function streamAnswer(question) {
  const r = await post("/v1/ask", {question, stream: true});
  lastRequest = r.headers.get("X-Request-Id");
  const reader = r.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      block.split("\n").forEach((line) => {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      });
      const payload = JSON.parse(data);
      if (event === "token") $("answer").textContent += payload.text;
      else if (event === "replace") $("answer").textContent = payload.text;  // the checked answer replaces what streamed
      else if (event === "citations") {
        renderCitations(payload.citations);
        $("generation").textContent = payload.generation;
        if (payload.refused) { $("reason").textContent = payload.reason; show("refusal", true); show("answer", false); }
      } else if (event === "done") $("latency").textContent = payload.latency_ms;
      else if (event === "error") fail(payload.error.message);
    }
  }
}

async function ask(ev) {
  if (ev) ev.preventDefault();
  show("error", false);
  if (!token()) { fail(t("no_token")); return; }
  localStorage.setItem("rag_token", token());
  const question = $("q").value.trim(), mode = $("mode").value, retrieveOnly = $("retrieve_only").checked;
  if (!question) return;
  $("go").disabled = true;
  $("answer").textContent = ""; $("citations").replaceChildren(); show("refusal", false); show("answer", true);
  show("answer_box", !retrieveOnly);
  try {
    await whoami();
    const searching = post("/v1/search", {query: question, mode, k: 10, retrieve_only: retrieveOnly, debug: isAdmin})
      .then((r) => r.json()).then((s) => renderHits(s.hits, mode));
    if (!retrieveOnly) await streamAnswer(question);
    await searching;
    document.body.dataset.state = "done";
  } catch (e) { fail(e.message); document.body.dataset.state = "error"; }
  finally { $("go").disabled = false; }
}

document.querySelectorAll("#feedback button").forEach((b) => b.addEventListener("click", async () => {
  if (!lastRequest) return;
  await post("/v1/feedback", {request_id: lastRequest, rating: b.dataset.rating});
  $("feedback").textContent = t("thanks");
}));
$("lang").addEventListener("click", () => { lang = lang === "zh" ? "en" : "zh"; applyLang(); });
$("ask").addEventListener("submit", ask);

const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) { localStorage.setItem("rag_token", fragment.get("token")); history.replaceState(null, "", location.pathname + location.search); }
$("token").value = localStorage.getItem("rag_token") || "";
applyLang();
if (params.get("mode")) $("mode").value = params.get("mode");
if (params.get("retrieve_only") === "1") $("retrieve_only").checked = true;
if (params.get("q")) { $("q").value = params.get("q"); ask(); } else { whoami(); }
</script>
</body>
</html>
"""
