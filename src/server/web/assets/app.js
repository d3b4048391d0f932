// tavern explorer: one page app over tavern serve's JSON API. Plain DOM, no build step, no
// network beyond this server. Text is always set with textContent (never innerHTML), so
// tool descriptions and results cannot inject markup.
"use strict";

// ---------- small DOM and HTTP helpers ----------

function h(tag, attrs, ...children) {
  const svg = ["svg", "g", "rect", "text", "path", "title", "tspan"].includes(tag);
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || `http_${status}`;
    this.suggestions = e.suggestions || [];
  }
}

// A server started with --token wants `Authorization: Bearer` on every API call. The user
// types the token once per tab (kept in sessionStorage, never in the address).
const TOKEN_KEY = "tavern-token";
function token() { return sessionStorage.getItem(TOKEN_KEY); }
function withAuth(headers) {
  const t = token();
  return t ? Object.assign({}, headers, { Authorization: `Bearer ${t}` }) : headers;
}

async function api(path, opts) {
  const o = Object.assign({}, opts);
  o.headers = withAuth(Object.assign({ Accept: "application/json" }, o.headers));
  const r = await fetch(path, o);
  let body = null;
  const text = await r.text();
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = { error: { message: text } }; }
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

// Reads a `text/event-stream` response body: `onEvent(name, dataText)` for each event with
// data (a priming event without data is skipped); it may return true to stop reading.
async function readSse(r, onEvent) {
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length || (data.length === 1 && data[0] === "")) continue;
      if (onEvent(name, data.join("\n"))) { reader.cancel().catch(() => {}); return; }
    }
  }
}

// Server-sent events over fetch (EventSource cannot send the Authorization header).
// `on` maps event names to handlers of the parsed `data`; `onOpen`, `onEnd(error)` are told
// when the stream opens and ends. Returns a function that closes the stream.
function streamEvents(path, on, onOpen, onEnd) {
  const ctl = new AbortController();
  (async () => {
    let err = null;
    try {
      const r = await fetch(path, { headers: withAuth({ Accept: "text/event-stream" }), signal: ctl.signal });
      if (!r.ok) {
        let body = null;
        try { body = await r.json(); } catch (_) { /* not JSON */ }
        throw new ApiError(r.status, body);
      }
      if (onOpen) onOpen();
      await readSse(r, (name, text) => {
        if (!on[name]) return false;
        let d;
        try { d = JSON.parse(text); } catch (_) { d = { text }; }
        on[name](d);
        return false;
      });
    } catch (e) {
      if (e.name === "AbortError") return;
      err = e;
    }
    if (onEnd) onEnd(err);
  })();
  return () => ctl.abort();
}

// One request whose answer is shown with its details: status, headers, time (measured here,
// from sending to the last byte) and the request as curl. `body`: a value sent as JSON.
async function exchange(method, path, body) {
  const headers = withAuth(Object.assign({ Accept: "application/json" }, body === undefined ? {} : { "Content-Type": "application/json" }));
  const started = performance.now();
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  const ms = performance.now() - started;
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  return { method, path, body, status: r.status, statusText: r.statusText, ok: r.ok, headers: [...r.headers.entries()], ms, text, json };
}

// A POSIX shell word holding `s` as it is.
function shellQuote(s) { return "'" + String(s).replace(/'/g, "'\\''") + "'"; }

// The request as a curl command (the token, when the server wants one, as $TAVERN_TOKEN:
// the page never prints it).
function curlOf(method, path, body) {
  const lines = [`curl -sS${method === "GET" ? "" : " -X " + method} ${shellQuote(location.origin + path)}`];
  if (token()) lines.push(`-H "Authorization: Bearer $TAVERN_TOKEN"`);
  if (body !== undefined) {
    lines.push(`-H ${shellQuote("Content-Type: application/json")}`);
    lines.push(`--data-raw ${shellQuote(JSON.stringify(body))}`);
  }
  return lines.join(" \\\n  ");
}

async function copyText(text, pre) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    // No clipboard API (not a secure context, or refused): select the text and copy it.
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return document.execCommand("copy");
  }
}

// Beside an answer: the request as curl (with a Copy button), the status, the time and the
// response headers.
function exchangeView(x, what) {
  const curl = curlOf(x.method, x.path, x.body);
  const pre = h("pre", { class: "curl", id: "curl" }, curl);
  const state = h("span", { class: "muted", id: "copy-state", role: "status" }, "");
  const copy = h("button", { type: "button", class: "secondary small", id: "copy-curl" }, "Copy");
  copy.addEventListener("click", async () => {
    state.textContent = (await copyText(curl, pre)) ? "Copied." : "Select the text and copy it.";
  });
  const statusClass = x.ok ? "ok" : "bad";
  return h("section", { class: "exchange", id: "exchange", "aria-label": `The request ${what} and its answer` },
    h("h3", {}, `Request ${what}`),
    h("div", { class: "curl-row" }, pre, h("div", {}, copy, " ", state)),
    h("dl", { class: "kv" },
      h("dt", {}, "Status"), h("dd", { id: "http-status", class: statusClass }, `${x.status} ${x.statusText || ""}`.trim()),
      h("dt", {}, "Time"), h("dd", { id: "http-time" }, `${x.ms.toFixed(1)} ms (sent to last byte, measured in the browser)`)),
    h("details", { id: "response-headers" }, h("summary", {}, `Response headers (${x.headers.length})`),
      h("table", {}, h("tbody", {}, x.headers.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, h("code", {}, k)), h("td", {}, h("code", {}, v))))))));
}

function postJson(path, value) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(value),
  });
}

function pretty(v) {
  return typeof v === "string" ? v : JSON.stringify(v, null, 2);
}

function errorBox(e) {
  return h("div", { class: "error-box", role: "alert" },
    h("strong", {}, e.code ? `${e.code}: ` : "Error: "), e.message,
    e.suggestions && e.suggestions.length
      ? h("ul", {}, e.suggestions.map((s) => h("li", {}, s)))
      : null);
}

function main() { return document.getElementById("main"); }

function setPage(title, ...content) {
  document.title = `${title} · tavern`;
  const m = main();
  m.replaceChildren(...content.flat().filter(Boolean));
}

function markNav(path) {
  for (const a of document.querySelectorAll(".top nav a")) {
    const href = a.getAttribute("href");
    const current = href === "/" ? path === "/" || path.startsWith("/tools/") || path.startsWith("/workflows/") : path.startsWith(href);
    if (current) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
}

function toolHref(id) { return `/tools/${encodeURIComponent(id)}`; }
function workflowHref(id) { return `/workflows/${encodeURIComponent(id)}`; }

// ---------- JSON Schema → form ----------

function schemaType(s) {
  if (Array.isArray(s.type)) return s.type.filter((t) => t !== "null")[0] || "string";
  // No type: any JSON value (sent as JSON when the text parses as JSON, else as text).
  return s.type || (s.enum ? "enum" : "any");
}

function typeLabel(s) {
  if (s.enum) return "one of " + s.enum.map((v) => JSON.stringify(v)).join(", ");
  const t = schemaType(s);
  if (t === "array" && s.items && s.items.type) return `array of ${s.items.type}`;
  return t;
}

// Words that name content (a file's text, a message, code …): a string parameter whose name
// ends with one of them gets a multi-line field.
const CONTENT_WORDS = new Set(["content", "contents", "text", "body", "code", "source", "script",
  "prompt", "message", "markdown", "html", "json", "yaml", "xml", "csv", "sql", "template", "patch",
  "diff", "note", "notes", "description", "document", "letter", "story", "snippet", "program",
  "instructions", "essay"]);
// `format` values that say the text is long or structured.
const CONTENT_FORMATS = new Set(["textarea", "multiline", "markdown", "html", "code", "json", "yaml", "xml"]);

function nameWords(name) {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
}

// Whether a string parameter gets a multi-line field: a `contentMediaType`, a content
// `format`, a default with a line break, a `maxLength` over 200, or (without a `maxLength`)
// a name ending with a content word (`content`, `file_content`, `text`, `body`, `prompt` …).
function isLongString(name, s) {
  if (s.contentMediaType || s.contentEncoding) return true;
  if (CONTENT_FORMATS.has(String(s.format || "").toLowerCase())) return true;
  if (Object.prototype.hasOwnProperty.call(s, "default") && String(s.default).includes("\n")) return true;
  if (s.maxLength !== undefined && s.maxLength !== null) return s.maxLength > 200;
  const words = nameWords(name);
  return words.length > 0 && CONTENT_WORDS.has(words[words.length - 1]);
}

// Ctrl+Enter (⌘+Enter) submits `form` from any of its fields, textareas included (where
// Enter alone adds a line).
function ctrlEnterSubmits(form) {
  form.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
}

// Builds the fields of `schema` into `form`; returns a function reading the arguments object
// (or throwing with a message naming the field whose JSON does not parse).
function buildFields(form, schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const readers = [];
  const names = Object.keys(props);
  if (!names.length) form.append(h("p", { class: "muted" }, "This tool takes no parameters."));
  for (const name of names) {
    const s = props[name] || {};
    const id = `p-${name}`;
    const hintId = `${id}-hint`;
    const isReq = required.has(name);
    const t = schemaType(s);
    const hasDefault = Object.prototype.hasOwnProperty.call(s, "default");
    let input;
    let read;
    let multiline = false;
    const common = { id, name, "aria-describedby": hintId, "aria-required": isReq ? "true" : null };
    if (s.enum) {
      input = h("select", common,
        isReq ? null : h("option", { value: "" }, "(not set)"),
        s.enum.map((v, i) => h("option", { value: String(i), selected: hasDefault && JSON.stringify(v) === JSON.stringify(s.default) }, typeof v === "string" ? v : JSON.stringify(v))));
      read = () => (input.value === "" ? undefined : s.enum[Number(input.value)]);
    } else if (t === "boolean") {
      input = h("select", common,
        isReq && hasDefault ? null : h("option", { value: "" }, "(not set)"),
        h("option", { value: "true", selected: s.default === true }, "true"),
        h("option", { value: "false", selected: s.default === false }, "false"));
      read = () => (input.value === "" ? undefined : input.value === "true");
    } else if (t === "integer" || t === "number") {
      input = h("input", Object.assign({ type: "number", step: t === "integer" ? "1" : "any", value: hasDefault ? String(s.default) : null }, common));
      read = () => {
        const v = input.value.trim();
        if (v === "") return undefined;
        const n = Number(v);
        return Number.isNaN(n) ? v : n;
      };
    } else if (t === "string") {
      multiline = isLongString(name, s);
      input = multiline
        ? h("textarea", Object.assign({ rows: 6, spellcheck: "false" }, common), hasDefault ? String(s.default) : "")
        : h("input", Object.assign({ type: "text", value: hasDefault ? String(s.default) : null, autocomplete: "off" }, common));
      read = () => (input.value === "" ? undefined : input.value);
    } else if (t === "any") {
      input = h("textarea", Object.assign({ rows: 2, spellcheck: "false" }, common), hasDefault ? JSON.stringify(s.default) : "");
      read = () => {
        const v = input.value;
        if (v.trim() === "") return undefined;
        try { return JSON.parse(v); } catch (_) { return v; }
      };
    } else {
      input = h("textarea", Object.assign({ rows: 3, spellcheck: "false" }, common), hasDefault ? JSON.stringify(s.default, null, 2) : "");
      read = () => {
        const v = input.value.trim();
        if (v === "") return undefined;
        try { return JSON.parse(v); } catch (e) { throw new Error(`${name}: not JSON (${e.message})`); }
      };
    }
    const hint = [t === "any" ? "any JSON value (other text is sent as a string)" : typeLabel(s), isReq ? "required" : "optional"];
    if (hasDefault) hint.push(`default ${JSON.stringify(s.default)}`);
    if (s.minimum !== undefined) hint.push(`minimum ${s.minimum}`);
    if (s.maximum !== undefined) hint.push(`maximum ${s.maximum}`);
    if (s.maxLength !== undefined) hint.push(`at most ${s.maxLength} characters`);
    if (multiline) hint.push("Enter adds a line, Ctrl+Enter (⌘+Enter) runs");
    form.append(h("div", { class: "field" },
      h("label", { for: id }, h("code", {}, name), isReq ? h("span", { class: "req", "aria-hidden": "true" }, " *") : null),
      h("p", { class: "hint", id: hintId }, (s.description ? s.description + " — " : "") + hint.join(", ")),
      input));
    readers.push([name, read]);
  }
  return () => {
    const args = {};
    for (const [name, read] of readers) {
      const v = read();
      if (v !== undefined) args[name] = v;
    }
    return args;
  };
}

// Shows one invoke report ({results, diagnostics}) in `box`; `cancelled`: the report a
// cancelled job left (a neutral box: the person stopped it, nothing failed).
function showReport(box, report, cancelled) {
  box.replaceChildren();
  const results = (report && report.results) || [];
  const diags = (report && report.diagnostics) || [];
  const failed = results.some((r) => !r.ok) || diags.some((d) => d.severity === "error") || !results.length;
  if (cancelled) {
    box.className = "result cancelled";
    box.append(h("h2", { class: "muted" }, "Cancelled"), h("p", { class: "muted" }, "The job was cancelled; what it did before stopping is below."));
  } else {
    box.className = `result ${failed ? "failed" : "ok"}`;
    box.append(h("h2", { class: failed ? "bad" : "ok" }, failed ? "Failed" : "Succeeded"));
  }
  for (const r of results) {
    if (r.ok) {
      box.append(h("h3", {}, `Result of ${r.tool}`), h("pre", { class: "value" }, pretty(r.value)));
    } else {
      box.append(h("h3", {}, `Error of ${r.tool}`),
        h("p", { class: "error-code" }, h("code", {}, r.error.code), " ", r.error.message));
    }
    box.append(h("h3", {}, "Observation (as the model sees it)"), h("pre", { class: "observation" }, r.observation));
  }
  if (diags.length) {
    box.append(h("h3", {}, "Diagnostics"), h("ul", {}, diags.map((d) => h("li", {}, `${d.severity || ""} ${d.code || ""}: ${d.message || JSON.stringify(d)}`))));
  }
}

// ---------- jobs (POST /api/jobs + its SSE stream) ----------

// Starts `call` as a job and follows its events. `on` gets {status, progress, node, call, end}.
async function startJob(call, on) {
  const x = await exchange("POST", "/api/jobs", call);
  if (on.exchange) on.exchange(x);
  if (!x.ok) throw new ApiError(x.status, x.json || { error: { message: x.text } });
  const job = x.json;
  let ended = false;
  const handlers = {};
  for (const name of ["status", "progress", "node", "call"]) handlers[name] = (d) => on[name] && on[name](d);
  handlers.end = (d) => { ended = true; if (on.end) on.end(d); };
  // The stream closes after `end`; closing before it means the server went away.
  const close = streamEvents(`/api/jobs/${encodeURIComponent(job.id)}/events`, handlers, null,
    (err) => { if (!ended && on.lost) on.lost(err); });
  return { job, close, cancel: () => api(`/api/jobs/${encodeURIComponent(job.id)}`, { method: "DELETE" }) };
}

function jobPanel() {
  const status = h("span", { id: "job-status", class: "st" }, "");
  const bar = h("progress", { id: "job-progress", max: "1", "aria-label": "Job progress" });
  const msg = h("span", { id: "job-message", class: "muted" }, "");
  const cancel = h("button", { type: "button", id: "cancel", class: "secondary", disabled: true }, "Cancel job");
  const calls = h("ul", { id: "job-calls" });
  const id = h("code", { id: "job-id" }, "");
  const panel = h("section", { id: "job", "aria-live": "polite", hidden: true },
    h("h2", {}, "Job ", id),
    h("p", {}, "Status: ", status), h("p", {}, bar, " ", msg), h("div", { class: "actions" }, cancel), calls);
  const setStatus = (s) => { status.textContent = s; status.className = `st st-${s}`; };
  // Once a cancel is asked for (here or by anyone: a `cancelled` status), what ends after it
  // ends because of it: the bar stays where the cancel found it, and failures read
  // "cancelled".
  let cancelAsked = false;
  const markCancelled = () => {
    cancelAsked = true;
    if (!bar.hasAttribute("value")) bar.value = 0;
    bar.classList.add("cancelled");
  };
  // Starts `body` as a job and shows its events in this panel and its end in `result`;
  // `extra` adds or replaces event handlers (a workflow page follows its nodes).
  const run = async (body, result, extra = {}) => {
    calls.replaceChildren();
    bar.removeAttribute("value");
    bar.classList.remove("cancelled");
    cancelAsked = false;
    msg.textContent = "";
    panel.hidden = false;
    const j = await startJob(body, {
      status: (d) => { if (d.status === "cancelled") markCancelled(); setStatus(d.status); },
      progress: (d) => {
        if (cancelAsked) return;
        if (d.total) { bar.max = d.total; bar.value = d.done; } else bar.removeAttribute("value");
        msg.textContent = `${d.done}${d.total ? " / " + d.total : ""}${d.message ? " — " + d.message : ""}`;
      },
      call: (d) => calls.append(h("li", {}, `${d.tool}: ${d.ok ? "ok" : cancelAsked ? "cancelled" : "failed"} in ${d.elapsed_ms} ms`)),
      end: (d) => {
        setStatus(d.status);
        cancel.disabled = true;
        const cancelled = d.status === "cancelled";
        if (cancelled) {
          markCancelled();
          msg.textContent = `Cancelled${bar.max > 1 || bar.value ? ` after ${bar.value} of ${bar.max}` : ""}.`;
        }
        if (d.result) showReport(result, d.result, cancelled);
        else if (cancelled) { result.className = "result cancelled"; result.replaceChildren(h("h2", { class: "muted" }, "Cancelled"), h("p", { class: "muted" }, "The job was cancelled before it left a result.")); }
        else if (d.error) { result.className = "result failed"; result.replaceChildren(errorBox(d.error)); }
      },
      lost: (err) => { msg.textContent = `The event stream closed early${err ? ": " + err.message : ""}; reload the page to see the job's state.`; },
      ...extra,
    });
    id.textContent = j.job.id;
    setStatus(j.job.status);
    cancel.disabled = false;
    cancel.onclick = async () => {
      cancel.disabled = true;
      markCancelled();
      msg.textContent = "Cancelling…";
      try { setStatus((await j.cancel()).status); } catch (err) { result.replaceChildren(errorBox(err)); }
    };
    return j;
  };
  return { panel, setStatus, run, cancelAsked: () => cancelAsked };
}

// ---------- pages ----------

// Up to this many tools shown, the index's plugin groups start open.
const OPEN_GROUPS_UP_TO = 12;

async function toolsPage() {
  const data = await api("/api/catalog");
  const tools = data.tools;
  const params = new URLSearchParams(location.search);
  const plugins = [...new Set(tools.map((t) => t.plugin).filter(Boolean))].sort();
  const hints = [...new Set(tools.flatMap((t) => t.hints))].sort();
  const q = h("input", { type: "search", id: "q", value: params.get("q") || "", placeholder: "id, words of the description…", autocomplete: "off" });
  const sel = (id, label, values, chosen) => h("select", { id, "aria-label": label },
    h("option", { value: "" }, "all"), values.map((v) => h("option", { value: v, selected: v === chosen }, v)));
  const plugin = sel("plugin", "Plugin", plugins, params.get("plugin"));
  const kind = sel("kind", "Kind", ["service", "script", "node", "workflow"], params.get("kind"));
  const hint = sel("hint", "Annotation", hints, params.get("hint"));
  const compact = h("input", { type: "checkbox", id: "compact", checked: params.get("view") === "compact" });
  const count = h("p", { id: "count", role: "status" });
  const list = h("div", { class: "cards", id: "results" });
  const expand = h("button", { type: "button", class: "secondary small", id: "expand-all" }, "Expand all");
  const collapse = h("button", { type: "button", class: "secondary small", id: "collapse-all" }, "Collapse all");
  const setAll = (open) => { for (const d of list.querySelectorAll("details.group")) d.open = open; };
  expand.addEventListener("click", () => setAll(true));
  collapse.addEventListener("click", () => setAll(false));
  // The `node:*` tools (one per node type) are set aside: callable, rarely what one looks for.
  const isNode = (t) => t.id.startsWith("node:");
  const main = tools.filter((t) => !isNode(t));
  const nodeList = h("ul", { class: "compact", id: "node-results" });
  const nodeHead = h("summary", {}, "");
  const nodes = h("details", { id: "node-tools" }, nodeHead,
    h("p", { class: "muted" }, "One tool per node type: callable, but left out of the lists a model reads unless tools.list_nodes = true."),
    nodeList);
  const render = () => {
    const words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    const match = (t) => {
      const hay = `${t.id} ${t.displayName} ${t.description} ${t.plugin || ""}`.toLowerCase();
      return words.every((w) => hay.includes(w))
        && (!plugin.value || t.plugin === plugin.value)
        && (!kind.value || t.kind === kind.value)
        && (!hint.value || t.hints.includes(hint.value));
    };
    const shown = main.filter(match);
    const shownNodes = tools.filter(isNode).filter(match);
    count.textContent = `${shown.length} of ${main.length} tools`;
    list.className = compact.checked ? "compact" : "cards";
    // One collapsible group per plugin (else the id's namespace). Groups start open when a
    // filter is set or few tools are shown, else closed: the page stays short.
    const groups = new Map();
    for (const t of shown) {
      const g = t.plugin || t.id.split(":")[0];
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(t);
    }
    const filtering = words.length > 0 || plugin.value || kind.value || hint.value;
    const open = Boolean(filtering) || shown.length <= OPEN_GROUPS_UP_TO;
    list.replaceChildren(...[...groups.keys()].sort((a, b) => a.localeCompare(b)).map((g) => {
      const items = groups.get(g);
      return h("details", { class: "group", "data-group": g, open },
        h("summary", {}, h("span", { class: "group-name" }, g), " ",
          h("span", { class: "muted" }, `${items.length} tool${items.length === 1 ? "" : "s"}`)),
        h("ul", { class: compact.checked ? "compact" : "cards" }, items.map(compact.checked ? toolLine : toolCard)));
    }));
    nodeHead.textContent = `Node tools (${shownNodes.length} of ${tools.length - main.length})`;
    nodeList.replaceChildren(...shownNodes.map(toolLine));
    nodes.hidden = tools.length === main.length;
    const p = new URLSearchParams();
    if (q.value) p.set("q", q.value);
    for (const [k, s] of [["plugin", plugin], ["kind", kind], ["hint", hint]]) if (s.value) p.set(k, s.value);
    if (compact.checked) p.set("view", "compact");
    history.replaceState(null, "", p.toString() ? `/?${p}` : "/");
  };
  for (const el of [q, plugin, kind, hint, compact]) { el.addEventListener("input", render); el.addEventListener("change", render); }
  setPage("Tools",
    h("h1", {}, "Tools"),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      h("div", {}, h("label", { for: "q" }, "Search"), q),
      h("div", {}, h("label", { for: "plugin" }, "Plugin"), plugin),
      h("div", {}, h("label", { for: "kind" }, "Kind"), kind),
      h("div", {}, h("label", { for: "hint" }, "Annotation"), hint),
      h("div", {}, h("label", { for: "compact" }, compact, " Compact"))),
    h("div", { class: "actions count-row" }, count, expand, collapse), list, nodes);
  render();
}

function paramTable(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const names = Object.keys(props);
  if (!names.length) return h("p", { class: "muted" }, "Parameters: none");
  return h("table", { class: "params" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Parameter"), h("th", { scope: "col" }, "Type"), h("th", { scope: "col" }, "Required"), h("th", { scope: "col" }, "Description"))),
    h("tbody", {}, names.map((n) => {
      const s = props[n] || {};
      const extra = Object.prototype.hasOwnProperty.call(s, "default") ? ` (default ${JSON.stringify(s.default)})` : "";
      return h("tr", {}, h("td", {}, h("code", {}, n)), h("td", {}, typeLabel(s)), h("td", {}, required.has(n) ? "required" : "optional"), h("td", {}, (s.description || "") + extra));
    })));
}

function badges(t) {
  return h("span", { class: "badges" },
    h("span", { class: `badge kind-${t.kind}`, title: "kind" }, t.kind),
    t.plugin ? h("span", { class: "badge", title: "plugin" }, t.plugin) : null,
    t.hints.map((x) => h("span", { class: "badge", title: "annotation" }, x)));
}

// One line per tool: its id (a link) and the first sentence of its description.
function toolLine(t) {
  const first = (t.description || "").split(/(?<=\.)\s/)[0];
  return h("li", { "data-tool": t.id }, h("a", { href: toolHref(t.id) }, t.id), " ", h("span", { class: "muted" }, first));
}

function toolCard(t) {
  return h("li", { class: "card", "data-tool": t.id },
    h("h2", {}, h("a", { href: toolHref(t.id) }, t.id), badges(t)),
    t.displayName && t.displayName !== t.id ? h("p", { class: "muted" }, t.displayName) : null,
    h("p", {}, t.description || h("span", { class: "muted" }, "(no description)")),
    paramTable(t.inputSchema),
    h("details", {}, h("summary", {}, "Example call in TAM"), h("pre", { class: "tam" }, t.tamExample)),
    t.workflow ? h("p", {}, h("a", { href: workflowHref(t.workflow) }, `Graph of workflow ${t.workflow}`)) : null);
}

async function toolPage(id) {
  const t = await api(`/api/catalog/${encodeURIComponent(id)}`);
  const form = h("form", { id: "tool-form", novalidate: true });
  const readArgs = buildFields(form, t.inputSchema);
  ctrlEnterSubmits(form);
  const result = h("div", { id: "result", "aria-live": "polite" });
  const details = h("div", { id: "answer-details" });
  const mcp = h("section", { id: "mcp", hidden: true, "aria-live": "polite" });
  const jp = jobPanel();
  const call = () => ({ tool: t.id, args: readArgs() });
  const fail = (err) => { result.className = "result failed"; result.replaceChildren(errorBox(err)); };
  const clear = () => { result.replaceChildren(); details.replaceChildren(); mcp.hidden = true; jp.panel.hidden = true; };
  form.append(h("div", { class: "actions" },
    h("button", { type: "submit", id: "run" }, "Run"),
    h("button", { type: "button", id: "run-job", class: "secondary", onclick: () => runAsJob() }, "Run as job"),
    h("button", { type: "button", id: "run-mcp", class: "secondary", onclick: () => runOverMcp() }, "Run over MCP")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear();
    result.replaceChildren(h("p", { class: "muted" }, "Running…"));
    try {
      const x = await exchange("POST", "/api/invoke", call());
      details.replaceChildren(exchangeView(x, "POST /api/invoke"));
      if (x.ok) showReport(result, x.json);
      else fail(new ApiError(x.status, x.json || { error: { message: x.text } }));
    } catch (err) {
      fail(err);
    }
  });
  async function runAsJob() {
    clear();
    try {
      await jp.run(call(), result, { exchange: (x) => details.replaceChildren(exchangeView(x, "POST /api/jobs")) });
    } catch (err) {
      jp.panel.hidden = true;
      fail(err);
    }
  }
  async function runOverMcp() {
    clear();
    let args;
    try { args = readArgs(); } catch (err) { fail(err); return; }
    const log = h("ol", { id: "mcp-log", class: "mcp-log" });
    const summary = h("p", { id: "mcp-summary", role: "status" }, "Running…");
    mcp.replaceChildren(h("h2", {}, "Over MCP"),
      h("p", { class: "muted" }, "The same call through this server's MCP endpoint (Streamable HTTP at /mcp), as an MCP client makes it: every JSON-RPC message sent and received, with the notifications (progress, logs) in the order they came."),
      summary, log);
    mcp.hidden = false;
    const t0 = performance.now();
    const add = (dir, m, via) => log.append(mcpLine(dir, m, via, performance.now() - t0));
    try {
      const answer = await mcpCall(t.name, args, add);
      const r = answer && answer.result;
      summary.className = r && !r.isError ? "ok" : "bad";
      summary.textContent = !answer ? "No answer."
        : answer.error ? `JSON-RPC error ${answer.error.code}: ${answer.error.message}`
          : r.isError ? "The tool failed (isError: true)." : "The tool succeeded.";
    } catch (err) {
      summary.className = "bad";
      summary.textContent = `The MCP exchange failed: ${err.message}`;
    }
  }
  setPage(t.id,
    h("p", {}, h("a", { href: "/" }, "← All tools")),
    h("h1", {}, t.id, badges(t)),
    t.displayName && t.displayName !== t.id ? h("p", { class: "muted" }, t.displayName) : null,
    h("p", {}, t.description),
    t.workflow ? h("p", {}, h("a", { href: workflowHref(t.workflow) }, `See the graph of workflow ${t.workflow}`)) : null,
    h("div", { class: "columns" },
      h("section", { "aria-labelledby": "try-h" },
        h("h2", { id: "try-h" }, "Try it"),
        h("p", { class: "muted" }, h("span", { class: "req" }, "*"), " marks a required parameter. Values are checked by the engine, exactly as for a model's call."),
        form, jp.panel, result, details, mcp),
      h("section", { "aria-labelledby": "man-h" },
        h("h2", { id: "man-h" }, "Manual"),
        paramTable(t.inputSchema),
        h("h3", {}, "Example call in TAM"), h("pre", { class: "tam" }, t.tamExample),
        h("h3", {}, "Example call in <ACTION>"), h("pre", {}, t.actionExample),
        h("h3", {}, "Manual entry (as in the prompt)"), h("pre", {}, t.manual),
        h("h3", {}, "JSON Schema"), h("pre", {}, pretty(t.inputSchema)))));
}

// ---------- MCP view: a call through the server's own MCP endpoint ----------

const MCP_REVISION = "2025-11-25";

// One JSON-RPC message in the MCP view: its direction, what it is, where it came, when.
function mcpLine(dir, m, via, ms) {
  let what;
  if (dir === "note") what = m;
  else if (m.method) what = `${m.method}${m.id !== undefined ? ` (request ${m.id})` : ""}`;
  else if (m.error) what = `error of request ${m.id}`;
  else what = `result of request ${m.id}`;
  const arrow = dir === "out" ? "→ sent" : dir === "in" ? "← received" : "·";
  return h("li", { class: `mcp-msg mcp-${dir}`, "data-method": m.method || (dir === "note" ? "" : m.error ? "error" : "result") },
    h("span", { class: "mcp-time muted" }, `${ms.toFixed(0)} ms`), " ",
    h("strong", {}, arrow), " ", h("code", {}, what), via ? h("span", { class: "muted" }, ` — ${via}`) : null,
    dir === "note" ? null : h("details", {}, h("summary", {}, "JSON"), h("pre", {}, JSON.stringify(m, null, 2))));
}

// Runs `tools/call` of `name` over MCP from the page: `initialize`, `notifications/initialized`,
// the session's GET stream (where logs come), the call with a progress token (its answer is
// an event stream of progress notifications and the result), then the session is ended
// (DELETE). `add(dir, message, via)` is told every message. Answers the call's response.
async function mcpCall(name, args, add) {
  let session = null;
  let seq = 0;
  const headers = (extra) => withAuth(Object.assign(
    session ? { "Mcp-Session-Id": session, "MCP-Protocol-Version": MCP_REVISION } : {}, extra));
  const send = async (msg) => {
    add("out", msg, "POST /mcp");
    const r = await fetch("/mcp", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", Accept: "application/json, text/event-stream" }),
      body: JSON.stringify(msg),
    });
    if (!session && r.headers.get("Mcp-Session-Id")) session = r.headers.get("Mcp-Session-Id");
    const type = r.headers.get("Content-Type") || "";
    if (type.includes("text/event-stream")) {
      let answer = null;
      await readSse(r, (_, text) => {
        const m = JSON.parse(text);
        add("in", m, `answer to POST (event stream, HTTP ${r.status})`);
        if (m.id === msg.id && !m.method) answer = m;
        return answer !== null;
      });
      return answer;
    }
    const text = await r.text();
    if (!text) { add("note", `HTTP ${r.status} ${r.statusText}, no body`); return null; }
    let m;
    try { m = JSON.parse(text); } catch (_) { throw new Error(`HTTP ${r.status}: ${text}`); }
    add("in", m, `answer to POST (JSON, HTTP ${r.status})`);
    if (m.error && !m.jsonrpc) throw new ApiError(r.status, m);
    return m;
  };
  const init = await send({ jsonrpc: "2.0", id: ++seq, method: "initialize", params: {
    protocolVersion: MCP_REVISION, capabilities: {}, clientInfo: { name: "tavern-explorer", version: "1" } } });
  if (!init || init.error || !session) throw new Error(init && init.error ? init.error.message : "initialize was not answered with a session");
  await send({ jsonrpc: "2.0", method: "notifications/initialized" });
  const ctl = new AbortController();
  let stream = null;
  try {
    const g = await fetch("/mcp", { headers: headers({ Accept: "text/event-stream" }), signal: ctl.signal });
    add("note", `GET /mcp: the session's event stream (HTTP ${g.status})`);
    if (g.ok) {
      stream = readSse(g, (_, text) => { add("in", JSON.parse(text), "session's GET stream"); return false; })
        .catch(() => { /* closed below */ });
    }
    const answer = await send({ jsonrpc: "2.0", id: ++seq, method: "tools/call",
      params: { name, arguments: args, _meta: { progressToken: `explorer-${seq}` } } });
    // Logs travel on the other stream: give the last ones a moment to arrive.
    await new Promise((res) => setTimeout(res, 300));
    return answer;
  } finally {
    ctl.abort();
    if (stream) await stream;
    try {
      const d = await fetch("/mcp", { method: "DELETE", headers: headers({}) });
      add("note", `DELETE /mcp: the session ended (HTTP ${d.status})`);
    } catch (_) { /* the server went away */ }
  }
}

// Lays the workflow out in columns by layer (topological depth, from the server) and draws
// it as SVG. Each node shows its id, type, the input slots its edges feed (left) and the
// output slots they leave from (right); an edge joins the two slot ports it names.
function drawGraph(wf) {
  const W = 180, GX = 70, GY = 26, PAD = 16, ROW = 15, HEAD = 42;
  const ins = new Map(), outs = new Map();
  const addSlot = (m, id, slot) => { if (!m.has(id)) m.set(id, []); if (!m.get(id).includes(slot)) m.get(id).push(slot); };
  for (const e of wf.edges) { addSlot(outs, e.source, e.sourceHandle); addSlot(ins, e.target, e.targetHandle); }
  const rowsOf = (id) => Math.max((ins.get(id) || []).length, (outs.get(id) || []).length);
  const heightOf = (id) => HEAD + ROW * rowsOf(id) + 22;
  const cols = new Map();
  for (const n of wf.nodes) {
    if (!cols.has(n.layer)) cols.set(n.layer, []);
    cols.get(n.layer).push(n);
  }
  // Fewer crossings: within a column, order nodes by the mean row of their sources
  // (one barycentre pass, left to right; file order breaks ties).
  const row = new Map();
  const layerIds = [...cols.keys()].sort((a, b) => a - b);
  for (const layer of layerIds) {
    const nodes = cols.get(layer);
    const bary = (n) => {
      const rows = wf.edges.filter((e) => e.target === n.id && row.has(e.source)).map((e) => row.get(e.source));
      return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : Infinity;
    };
    const keyed = nodes.map((n, i) => [bary(n), i, n]);
    keyed.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] === Infinity ? 1 : b[0] === Infinity ? -1 : a[0] - b[0]));
    cols.set(layer, keyed.map((k) => k[2]));
    cols.get(layer).forEach((n, i) => row.set(n.id, i));
  }
  const pos = new Map();
  let height = 0;
  for (const [layer, nodes] of cols) {
    let y = PAD;
    for (const n of nodes) {
      pos.set(n.id, { x: PAD + layer * (W + GX), y });
      y += heightOf(n.id) + GY;
    }
    height = Math.max(height, y - GY + PAD);
  }
  // Edges that skip a column run in their own lane under the nodes, so they never hide
  // behind the nodes they pass.
  const layerOf = new Map(wf.nodes.map((n) => [n.id, n.layer]));
  const long = wf.edges.filter((e) => (layerOf.get(e.target) ?? 0) - (layerOf.get(e.source) ?? 0) > 1);
  const laneTop = height;
  height += long.length ? long.length * 12 + 8 : 0;
  const layers = Math.max(0, ...wf.nodes.map((n) => n.layer)) + 1;
  const width = PAD * 2 + layers * W + (layers - 1) * GX;
  const port = (id, side, slot) => {
    const p = pos.get(id);
    const list = (side === "in" ? ins : outs).get(id) || [];
    return { x: side === "in" ? p.x : p.x + W, y: p.y + HEAD + ROW * list.indexOf(slot) + 4 };
  };
  const svg = h("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "graph-title" },
    h("title", { id: "graph-title" }, `Graph of ${wf.id}: ${wf.nodes.length} nodes, ${wf.edges.length} edges (listed in the tables below)`));
  for (const e of wf.edges) {
    if (!pos.has(e.source) || !pos.has(e.target)) continue;
    const a = port(e.source, "out", e.sourceHandle), b = port(e.target, "in", e.targetHandle);
    const dx = Math.max(30, (b.x - a.x) / 2);
    const lane = long.indexOf(e);
    const ly = laneTop + 4 + lane * 12;
    const d = lane < 0
      ? `M${a.x},${a.y} C${a.x + dx},${a.y} ${b.x - dx},${b.y} ${b.x},${b.y}`
      : `M${a.x},${a.y} C${a.x + 24},${a.y} ${a.x + 12},${ly} ${a.x + 36},${ly} L${b.x - 36},${ly} C${b.x - 12},${ly} ${b.x - 24},${b.y} ${b.x},${b.y}`;
    svg.append(h("path", { class: "edge", "data-edge": `${e.source}.${e.sourceHandle}->${e.target}.${e.targetHandle}`, d },
      h("title", {}, `${e.source}.${e.sourceHandle} → ${e.target}.${e.targetHandle}`)));
  }
  const clip = (t, n) => (t.length > n ? t.slice(0, n - 1) + "…" : t);
  for (const n of wf.nodes) {
    const p = pos.get(n.id);
    const H = heightOf(n.id);
    const slots = [];
    (ins.get(n.id) || []).forEach((slot, k) => {
      slots.push(h("path", { class: "port", d: `M0,${HEAD + ROW * k} l5,4 l-5,4 z` }));
      slots.push(h("text", { class: "slot slot-in", x: 9, y: HEAD + ROW * k + 8 }, clip(slot, 13)));
    });
    (outs.get(n.id) || []).forEach((slot, k) => {
      slots.push(h("path", { class: "port", d: `M${W - 5},${HEAD + ROW * k} l5,4 l-5,4 z` }));
      slots.push(h("text", { class: "slot slot-out", x: W - 9, y: HEAD + ROW * k + 8, "text-anchor": "end" }, clip(slot, 13)));
    });
    svg.append(h("g", { class: "node", "data-node": n.id, "data-status": "idle", transform: `translate(${p.x},${p.y})` },
      h("title", {}, `${n.id} (${n.type})`),
      h("rect", { width: W, height: H, rx: 6 }),
      h("text", { x: 9, y: 17, "font-weight": "700" }, clip(n.id, 22)),
      h("text", { class: "ntype", x: 9, y: 32 }, clip(n.type, 26)),
      slots,
      h("text", { class: "nstatus", x: 9, y: H - 8 }, "")));
  }
  return svg;
}

function slotTable(slots, caption) {
  const entries = Object.entries(slots || {});
  if (!entries.length) return h("p", { class: "muted" }, `${caption}: none`);
  return h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, ["Slot", "Type", "Required", "Description"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, entries.map(([k, s]) => h("tr", {},
      h("td", {}, h("code", {}, k)), h("td", {}, s.dataFlowType || ""), h("td", {}, s.required ? "required" : "optional"),
      h("td", {}, s.customDescription || s.description || "")))));
}

async function workflowPage(id) {
  const wf = await api(`/api/workflows/${encodeURIComponent(id)}`);
  const graph = drawGraph(wf);
  const rows = new Map();
  const nodeTable = h("table", { id: "nodes" },
    h("caption", {}, "Nodes"),
    h("thead", {}, h("tr", {}, ["Node", "Type", "Layer", "Status", "Time"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, wf.nodes.map((n) => {
      const st = h("td", { class: "status" }, "—"), tm = h("td", { class: "time" }, "");
      rows.set(n.id, { st, tm });
      return h("tr", { "data-node": n.id }, h("th", { scope: "row" }, h("code", {}, n.id)), h("td", {}, n.type), h("td", {}, n.layer), st, tm);
    })));
  const edgeTable = h("table", { id: "edges" },
    h("caption", {}, "Edges"),
    h("thead", {}, h("tr", {}, ["From", "Slot", "To", "Slot"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, wf.edges.map((e) => h("tr", {}, h("td", {}, h("code", {}, e.source)), h("td", {}, e.sourceHandle), h("td", {}, h("code", {}, e.target)), h("td", {}, e.targetHandle)))));
  const setNode = (nodeId, status, ms) => {
    const g = graph.querySelector(`g[data-node="${CSS.escape(nodeId)}"]`);
    const label = ms !== null && ms !== undefined ? `${status} · ${Math.round(ms)} ms` : status;
    if (g) { g.setAttribute("data-status", status); g.querySelector(".nstatus").textContent = label; }
    const r = rows.get(nodeId);
    if (r) {
      r.st.replaceChildren(h("span", { class: `st st-${status}` }, status));
      r.st.parentElement.setAttribute("data-status", status);
      r.tm.textContent = ms !== null && ms !== undefined ? `${Math.round(ms)} ms` : "";
    }
  };
  const result = h("div", { id: "result", "aria-live": "polite" });
  const details = h("div", { id: "answer-details" });
  const jp = jobPanel();
  const form = h("form", { id: "wf-form", novalidate: true });
  let readArgs = () => ({});
  ctrlEnterSubmits(form);
  if (wf.tool) {
    readArgs = buildFields(form, wf.inputSchema);
    form.append(h("div", { class: "actions" }, h("button", { type: "submit", id: "run" }, "Run workflow")));
  } else {
    form.append(h("p", { class: "muted" }, "This workflow has no interface, so it is not a tool and cannot be run from here."));
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    result.replaceChildren();
    details.replaceChildren();
    for (const n of wf.nodes) setNode(n.id, "pending", null);
    try {
      await jp.run({ tool: wf.tool, args: readArgs() }, result, {
        exchange: (x) => details.replaceChildren(exchangeView(x, "POST /api/jobs")),
        node: (d) => {
          if (d.workflow && d.workflow !== wf.id && d.workflow !== wf.tool) return;
          // A node that fails after a cancel was stopped by it.
          const st = d.status === "failed" && jp.cancelAsked() ? "cancelled" : d.status;
          setNode(d.node, st, d.elapsed_ms);
        },
      });
    } catch (err) {
      result.className = "result failed";
      result.replaceChildren(errorBox(err));
    }
  });
  setPage(wf.name || wf.id,
    h("p", {}, h("a", { href: "/?kind=workflow" }, "← All workflows")),
    h("h1", {}, wf.name || wf.id),
    h("dl", { class: "kv" },
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, wf.id)),
      h("dt", {}, "Tool"), h("dd", {}, wf.tool ? h("a", { href: toolHref(wf.tool) }, wf.tool) : "none (no interface)"),
      wf.source ? [h("dt", {}, "File"), h("dd", {}, h("code", {}, wf.source))] : null),
    h("p", {}, wf.description),
    h("h2", {}, "Graph"),
    h("div", { class: "graph" }, graph),
    h("div", { class: "columns" },
      h("section", {}, h("h2", {}, "Interface"), slotTable(wf.interfaceInputs, "Inputs"), slotTable(wf.interfaceOutputs, "Outputs"),
        h("h2", {}, "Run"), form, jp.panel, result, details),
      h("section", {}, nodeTable, edgeTable)));
}

function permissionList(p) {
  if (!p) return h("p", { class: "muted" }, "Permissions: not read (the plugin did not load).");
  const items = [];
  const add = (label, v) => { if (v && (!Array.isArray(v) || v.length)) items.push(h("li", {}, h("strong", {}, label + ": "), Array.isArray(v) ? v.join(", ") : String(v))); };
  add("fs read", p.fs && p.fs.read);
  add("fs write", p.fs && p.fs.write);
  add("processes", p.processes ? "yes" : null);
  add("network", p.network ? "yes" : null);
  add("hooks", p.hooks);
  add("services override", p.services && p.services.override);
  add("tools it may call", p.tools);
  add("environment", p.env);
  return items.length ? h("ul", { class: "perms" }, items) : h("p", { class: "muted" }, "Permissions: none declared.");
}

function problemList(problems) {
  return h("ul", { class: "problems" }, problems.map((p) => h("li", { class: "problem" },
    h("span", { class: "problem-loc" }, `${p.file}${p.line ? ":" + p.line : ""}${p.column ? ":" + p.column : ""}`), " — ",
    h("span", { class: "problem-message" }, p.message), p.hint ? h("span", { class: "muted" }, ` (${p.hint})`) : null)));
}

function pluginCard(p) {
  const failed = p.status === "failed";
  const label = failed ? "failed" : p.problems.length ? "loaded with problems" : "loaded";
  const cls = failed ? "status-failed" : p.problems.length ? "status-problems" : "status-loaded";
  const links = (ids, href) => ids.length ? h("ul", {}, ids.map((i) => h("li", {}, href ? h("a", { href: href(i) }, i) : h("code", {}, i)))) : h("p", { class: "muted" }, "none");
  return h("li", { class: "card", "data-plugin": p.name, "data-status": p.status },
    h("h2", {}, p.name, h("span", { class: "badges" }, h("span", { class: `badge ${cls}` }, label), p.version ? h("span", { class: "badge" }, `v${p.version}`) : null)),
    p.description ? h("p", {}, p.description) : null,
    h("p", { class: "muted" }, h("code", {}, p.dir)),
    p.problems.length ? [h("h3", { class: "bad" }, "Problems"), problemList(p.problems)] : null,
    failed ? null : [
      h("h3", {}, "Permissions"), permissionList(p.permissions),
      h("div", { class: "columns" },
        h("div", {}, h("h3", {}, "Tools"), links(p.tools, toolHref)),
        h("div", {}, h("h3", {}, "Nodes"), links(p.nodes), h("h3", {}, "Workflows"), links(p.workflows, workflowHref)))]);
}

async function pluginsPage() {
  const status = h("p", { id: "reload-status", role: "status", class: "muted" }, "");
  const refused = h("div", { id: "refused", "aria-live": "polite" });
  const list = h("ul", { class: "cards", id: "plugins" });
  const other = h("section", { id: "other-problems" });
  let seen = null;
  const load = async () => {
    const d = await api("/api/plugins");
    seen = d.reloads;
    const r = d.refusedReload;
    refused.replaceChildren(...(r ? [h("div", { class: "error-box" },
      h("p", {}, h("strong", {}, `A reload was refused at ${new Date(r.at_ms).toLocaleTimeString()}: `),
        "the changed files have new problems, so the previous version keeps serving. Fix these and save again:"),
      h("ul", { class: "problems" }, r.reasons.map((x) => h("li", { class: "problem" }, x))))] : []));
    list.replaceChildren(...d.plugins.map(pluginCard));
    other.replaceChildren(...(d.otherProblems.length ? [h("h2", {}, "Other load problems"), problemList(d.otherProblems)] : []));
    const failed = d.plugins.filter((p) => p.status === "failed").length;
    return `${d.plugins.length} plugins, ${failed} failed`;
  };
  const summary = h("p", { id: "plugin-summary" }, await load());
  setPage("Plugins", h("h1", {}, "Plugins"), summary, status, refused, list, other);
  let close = null;
  const follow = () => {
    close = streamEvents("/api/plugins/events", { engine: onEngine }, null,
      () => setTimeout(() => { if (document.body.contains(summary)) follow(); }, 2000));
  };
  const onEngine = async (d) => {
    if (d.reloads !== seen) {
      summary.textContent = await load();
      status.textContent = d.refused
        ? `A reload was refused at ${new Date().toLocaleTimeString()}; the list shows the version still serving.`
        : `Updated after a reload at ${new Date().toLocaleTimeString()} (engine generation ${d.generation}).`;
    }
  };
  follow();
  window.addEventListener("pagehide", () => close && close());
}

// Recent audit records the page asks for when it opens.
const AUDIT_RECENT = 100;

async function auditPage() {
  const body = h("tbody", { id: "audit-rows" });
  const state = h("p", { id: "audit-state", role: "status" }, "Connecting…");
  let paused = false;
  const pause = h("button", { type: "button", class: "secondary", id: "pause" }, "Pause");
  pause.addEventListener("click", () => { paused = !paused; pause.textContent = paused ? "Resume" : "Pause"; });
  const clear = h("button", { type: "button", class: "secondary", id: "clear", onclick: () => body.replaceChildren() }, "Clear");
  setPage("Audit", h("h1", {}, "Audit"),
    h("p", { class: "muted" }, `Every call, veto and override (newest first): the last ${AUDIT_RECENT} this server made, then each as it happens.`),
    state, h("div", { class: "actions" }, pause, clear),
    h("table", { class: "audit" },
      h("thead", {}, h("tr", {}, ["Time", "Event", "Tool", "Caller", "Outcome", "Details"].map((c) => h("th", { scope: "col" }, c)))),
      body));
  const add = (kind, d) => {
    if (paused) return;
    const outcome = d.outcome || d.decision || (d.ok === true ? "ok" : d.ok === false ? "failed" : "") || (d.error ? "error" : "");
    const rest = Object.assign({}, d);
    for (const k of ["ts", "time", "event", "kind", "tool", "caller", "outcome"]) delete rest[k];
    const when = d.ts || d.time ? new Date(d.ts || d.time).toLocaleTimeString() : new Date().toLocaleTimeString();
    body.prepend(h("tr", { class: `audit-${d.event || d.kind || kind}` },
      h("td", {}, when), h("td", {}, d.event || d.kind || kind), h("td", {}, d.tool ? h("code", {}, d.tool) : ""),
      h("td", {}, typeof d.caller === "string" ? d.caller : d.caller ? JSON.stringify(d.caller) : ""),
      h("td", {}, String(outcome)), h("td", {}, h("code", {}, JSON.stringify(rest)))));
    while (body.children.length > 500) body.lastChild.remove();
  };
  const on = {
    audit: (d) => add("audit", d),
    dropped: (d) => body.prepend(h("tr", {}, h("td", { colspan: "6", class: "bad" }, d.message || `${d.missed} records were missed`))),
  };
  let close = null;
  const follow = () => {
    // The stream starts with the recent records (all of them again after a reconnect).
    close = streamEvents(`/api/audit/events?recent=${AUDIT_RECENT}`, on, () => { body.replaceChildren(); state.textContent = "Live."; }, (err) => {
      state.textContent = `The stream ended${err ? ": " + err.message : ""}; reconnecting…`;
      setTimeout(() => { if (document.body.contains(state)) follow(); }, 2000);
    });
  };
  follow();
  window.addEventListener("pagehide", () => close && close());
}

// One content item of a resource (text, or a base64 blob: an image is shown).
function contentView(c) {
  const head = h("p", { class: "muted" }, h("code", {}, c.uri || ""), c.mimeType ? ` · ${c.mimeType}` : "");
  if (typeof c.text === "string") return h("div", { class: "content" }, head, h("pre", { class: "resource-text" }, c.text));
  if (typeof c.blob === "string") {
    const bytes = Math.floor(c.blob.length * 3 / 4);
    return h("div", { class: "content" }, head,
      c.mimeType && c.mimeType.startsWith("image/")
        ? h("img", { src: `data:${c.mimeType};base64,${c.blob}`, alt: c.uri || "image" })
        : h("p", {}, `A binary blob of about ${bytes} bytes.`));
  }
  return h("pre", {}, pretty(c));
}

// The variables of a uri template (`{id}`).
function templateVars(t) { return [...t.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]); }

async function resourcesPage() {
  const [r, tp] = await Promise.all([api("/api/resources"), api("/api/resources/templates")]);
  const out = h("div", { id: "resource-content", "aria-live": "polite" });
  const read = async (uri) => {
    out.replaceChildren(h("p", { class: "muted" }, `Reading ${uri}…`));
    try {
      const d = await api(`/api/resources/read?uri=${encodeURIComponent(uri)}`);
      out.replaceChildren(h("h2", {}, "Contents of ", h("code", {}, uri)), ...(d.contents || []).map(contentView));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  };
  const resources = (r.resources || []).map((x) => h("li", { class: "card", "data-uri": x.uri },
    h("h2", {}, x.title || x.name || x.uri),
    h("p", {}, h("code", {}, x.uri), x.mimeType ? h("span", { class: "badges" }, h("span", { class: "badge" }, x.mimeType)) : null),
    x.description ? h("p", {}, x.description) : null,
    h("button", { type: "button", class: "secondary small read", onclick: () => read(x.uri) }, "Read")));
  const templates = (tp.resourceTemplates || []).map((x, i) => {
    const vars = templateVars(x.uriTemplate);
    const inputs = vars.map((v) => h("input", { type: "text", id: `t${i}-${v}`, name: v, autocomplete: "off" }));
    const form = h("form", { class: "template-form" },
      vars.map((v, k) => h("div", { class: "field" }, h("label", { for: `t${i}-${v}` }, h("code", {}, v)), inputs[k])),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "secondary small" }, "Read")));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      let uri = x.uriTemplate;
      vars.forEach((v, k) => { uri = uri.replace(`{${v}}`, encodeURIComponent(inputs[k].value)); });
      read(uri);
    });
    return h("li", { class: "card", "data-template": x.uriTemplate },
      h("h2", {}, x.title || x.name || x.uriTemplate), h("p", {}, h("code", {}, x.uriTemplate)),
      x.description ? h("p", {}, x.description) : null, form);
  });
  setPage("Resources", h("h1", {}, "Resources"),
    h("p", { class: "muted" }, "What MCP clients read with resources/read (REST: GET /api/resources, /api/resources/read?uri=)."),
    h("div", { class: "columns" },
      h("section", {},
        h("h2", {}, `Resources (${resources.length})`),
        resources.length ? h("ul", { class: "cards", id: "resources" }, resources) : h("p", { class: "muted" }, "None."),
        h("h2", {}, `Templates (${templates.length})`),
        templates.length ? h("ul", { class: "cards", id: "templates" }, templates) : h("p", { class: "muted" }, "None.")),
      h("section", {}, out)));
}

function promptMessages(d) {
  return [
    d.description ? h("p", {}, d.description) : null,
    h("ol", { class: "chat", id: "prompt-messages" }, (d.messages || []).map((m) => {
      const c = m.content || {};
      const body = c.type === "text" ? h("pre", {}, c.text)
        : c.type === "resource" && c.resource ? contentView(c.resource)
          : c.type === "image" && c.data ? h("img", { src: `data:${c.mimeType};base64,${c.data}`, alt: "image" })
            : h("pre", {}, pretty(c));
      return h("li", { class: `msg ${m.role === "user" ? "user" : "agent"}`, "data-role": m.role }, h("strong", {}, m.role), body);
    })),
  ];
}

async function promptsPage() {
  const d = await api("/api/prompts");
  const out = h("div", { id: "prompt-result", "aria-live": "polite" });
  const cards = (d.prompts || []).map((p, i) => {
    const args = p.arguments || [];
    const inputs = args.map((a) => h("textarea", { id: `a${i}-${a.name}`, name: a.name, rows: 2, "aria-required": a.required ? "true" : null }));
    const form = h("form", { class: "prompt-form" },
      args.map((a, k) => h("div", { class: "field" },
        h("label", { for: `a${i}-${a.name}` }, h("code", {}, a.name), a.required ? h("span", { class: "req", "aria-hidden": "true" }, " *") : null),
        a.description ? h("p", { class: "hint" }, a.description) : null, inputs[k])),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "secondary small" }, "Get messages")));
    ctrlEnterSubmits(form);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = {};
      args.forEach((a, k) => { if (inputs[k].value !== "") body[a.name] = inputs[k].value; });
      out.replaceChildren(h("p", { class: "muted" }, "Getting…"));
      try {
        const r = await postJson(`/api/prompts/${encodeURIComponent(p.name)}`, body);
        out.replaceChildren(h("h2", {}, "Messages of ", h("code", {}, p.name)), ...promptMessages(r));
      } catch (err) {
        out.replaceChildren(errorBox(err));
      }
    });
    return h("li", { class: "card", "data-prompt": p.name },
      h("h2", {}, p.title || p.name), h("p", { class: "muted" }, h("code", {}, p.name)),
      p.description ? h("p", {}, p.description) : null, form);
  });
  setPage("Prompts", h("h1", {}, "Prompts"),
    h("p", { class: "muted" }, "What MCP clients get with prompts/get (REST: GET /api/prompts, POST /api/prompts/{name})."),
    h("div", { class: "columns" },
      h("section", {}, cards.length ? h("ul", { class: "cards", id: "prompts" }, cards) : h("p", { class: "muted" }, "None.")),
      h("section", {}, out)));
}

async function agentsPage() {
  const d = await api("/api/agents");
  setPage("Agents", h("h1", {}, "Agents"),
    d.agents.length
      ? h("ul", { class: "cards" }, d.agents.map((a) => h("li", { class: "card" },
        h("h2", {}, h("a", { href: `/agents/${encodeURIComponent(a.id)}` }, a.name)),
        h("p", { class: "muted" }, h("code", {}, a.id)),
        a.error ? h("p", { class: "bad" }, a.error) : h("p", {}, a.description))))
      : h("p", {}, "No agents in this home's agents/ directory."));
}

function turnView(t) {
  return [
    h("li", { class: "msg user" }, h("strong", {}, `Turn ${t.index} — to the agent`), h("pre", {}, t.input)),
    h("li", { class: "msg agent", "data-turn": t.index },
      h("strong", {}, "Agent"), h("pre", { class: "output" }, t.output),
      t.calls.map((c) => h("div", { class: `call ${c.ok ? "call-ok" : "call-failed"}` },
        h("p", {}, h("strong", {}, "Call "), h("code", {}, c.tool), ` — ${c.ok ? "ok" : "failed: " + c.error.code}`),
        h("pre", {}, JSON.stringify(c.args, null, 2)),
        h("p", {}, "Observation:"), h("pre", { class: "observation" }, c.observation))),
      t.diagnostics.length ? h("ul", {}, t.diagnostics.map((d) => h("li", {}, `${d.code || ""}: ${d.message || ""}`))) : null),
  ];
}

async function agentPage(id) {
  const a = await api(`/api/agents/${encodeURIComponent(id)}`);
  let session = null;
  const log = h("ol", { class: "chat", id: "chat", role: "log", "aria-live": "polite" });
  const msg = h("textarea", { id: "message", rows: 3 });
  const send = h("button", { type: "submit", id: "send" }, "Send");
  const cont = h("button", { type: "button", id: "continue", class: "secondary", disabled: true }, "Continue with the Observations");
  const reset = h("button", { type: "button", id: "new-session", class: "secondary" }, "New session");
  const err = h("div", { id: "chat-error", "aria-live": "assertive" });
  const sid = h("p", { class: "muted", id: "session" }, "No session yet.");
  // The model of a new session: as configured, or one of the home's scripted reply files.
  const model = h("select", { id: "model" },
    h("option", { value: "" }, "as configured (tavern.toml [llm])"),
    (a.scriptedModels || []).map((m) => h("option", { value: m }, m)));
  const run = async (message) => {
    err.replaceChildren();
    send.disabled = true; cont.disabled = true;
    try {
      const body = { session, message };
      if (!session && model.value) body.llm = model.value;
      const r = await postJson(`/api/agents/${encodeURIComponent(id)}/turn`, body);
      model.disabled = true;
      session = r.session;
      sid.textContent = `Session ${session}`;
      log.append(...turnView(r.turn));
      cont.disabled = !r.continue;
      msg.value = "";
    } catch (e) {
      err.replaceChildren(errorBox(e));
    } finally {
      send.disabled = false;
    }
  };
  const form = h("form", { id: "chat-form" },
    h("div", { class: "field" }, h("label", { for: "model" }, "Model (for a new session)"), model),
    h("div", { class: "field" }, h("label", { for: "message" }, "Message"), msg),
    h("div", { class: "actions" }, send, cont, reset));
  ctrlEnterSubmits(form);
  form.addEventListener("submit", (e) => { e.preventDefault(); run(msg.value); });
  cont.addEventListener("click", () => run(null));
  reset.addEventListener("click", async () => {
    if (session) { try { await api(`/api/agents/${encodeURIComponent(id)}/sessions/${session}`, { method: "DELETE" }); } catch (_) { /* already gone */ } }
    session = null; sid.textContent = "No session yet."; log.replaceChildren(); cont.disabled = true; model.disabled = false;
  });
  setPage(a.name,
    h("p", {}, h("a", { href: "/agents" }, "← All agents")),
    h("h1", {}, a.name), h("p", {}, a.description),
    h("details", {}, h("summary", {}, `Inventory (${a.tools.length} tools) and manual`),
      h("ul", {}, a.tools.map((t) => h("li", {}, h("code", {}, t)))), h("pre", {}, a.manual)),
    sid, log, err, form);
}

// The server wants a bearer token (it was started with --token): ask for it once per tab.
function tokenPage(e) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", "aria-describedby": "token-hint" });
  const form = h("form", { id: "token-form" },
    h("div", { class: "field" }, h("label", { for: "token" }, "Access token"),
      h("p", { class: "hint", id: "token-hint" }, "The token this server was started with (--token or TAVERN_TOKEN). It is kept for this tab only."),
      input),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "save-token" }, "Continue")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  });
  setPage("Token needed", h("h1", {}, "This server needs a token"),
    token() ? errorBox(e) : null, form);
  input.focus();
}

// ---------- routing ----------

async function route() {
  const path = location.pathname;
  markNav(path);
  const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (seg.length === 0) await toolsPage();
    else if (seg[0] === "tools" && seg.length === 2) await toolPage(seg[1]);
    else if (seg[0] === "workflows" && seg.length === 2) await workflowPage(seg[1]);
    else if (seg[0] === "plugins" && seg.length === 1) await pluginsPage();
    else if (seg[0] === "audit" && seg.length === 1) await auditPage();
    else if (seg[0] === "resources" && seg.length === 1) await resourcesPage();
    else if (seg[0] === "prompts" && seg.length === 1) await promptsPage();
    else if (seg[0] === "agents" && seg.length === 1) await agentsPage();
    else if (seg[0] === "agents" && seg.length === 2) await agentPage(seg[1]);
    else setPage("Not found", h("h1", {}, "Not found"), h("p", {}, `No page at ${path}.`), h("p", {}, h("a", { href: "/" }, "All tools")));
  } catch (e) {
    if (e.code === "unauthorized") tokenPage(e);
    else setPage("Error", h("h1", {}, "Cannot show this page"), errorBox(e), h("p", {}, h("a", { href: "/" }, "All tools")));
  }
  document.body.setAttribute("data-ready", "true");
}

document.addEventListener("DOMContentLoaded", route);
