// The auditor's console: one document, routed by path. Every page reads
// the API (api.js) one page at a time — it never loads every proposal —
// and updates itself from /v1/watch.
import { get, watch as liveWatch, HTTPError } from "./api.js";
import { h, clear, stateBadge, effectBadge, fmtTime, relTime, anomalyText, targetText, STATES, ANOMALIES, announce } from "./ui.js";
import { barChart, stackedTimeChart } from "./charts.js";
import { eventsPage, eventPage, statusPage, exportLinks } from "./events.js";
import { evidenceSection } from "./verify_ui.js";
import { holesSection, coveredCell, holeCrossing, holeChangeText, crossingMark } from "./holes_ui.js";

const params = new URLSearchParams(location.search);
const space = params.get("space") || "";
const main = document.getElementById("main");

// Time travel: ?as_of_seq=N or ?as_of=TIME shows the whole console as of
// that point of the log (the API's as-of reads), clearly marked, with a
// link back to now. Nothing is live in the past.
const asOfSeq = params.get("as_of_seq") || "";
const asOfTime = asOfSeq ? "" : params.get("as_of") || "";
const past = !!(asOfSeq || asOfTime);
function asOfParams(q) {
  if (asOfSeq) q.set("as_of_seq", asOfSeq);
  else if (asOfTime) q.set("as_of", asOfTime);
  return q;
}

// withSpace keeps ?space= and the as-of point on the console's own links;
// extra may set its own space.
function withSpace(path, extra) {
  const q = new URLSearchParams();
  if (space) q.set("space", space);
  asOfParams(q);
  for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
  for (const [k, v] of [...q.entries()]) if (v === "" || (k === "space" && v === "default" && !space)) q.delete(k);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
function spaceParams() {
  const q = new URLSearchParams();
  if (space) q.set("space", space);
  return q;
}
function apiParams(extra) {
  const q = asOfParams(spaceParams());
  for (const [k, v] of Object.entries(extra || {})) if (v != null && v !== "") q.set(k, v);
  return q;
}
function apiQuery(extra) { return apiParams(extra).toString(); }
// liveQuery is apiQuery for the routes that answer only now (/v1/changes).
function liveQuery(extra) {
  const q = spaceParams();
  for (const [k, v] of Object.entries(extra || {})) if (v != null && v !== "") q.set(k, v);
  return q.toString();
}
// watch is api.js's watch, except in the past, where nothing is live.
function watch(query, onChange, onState, onHoles) {
  if (past) return () => {};
  return liveWatch(query, onChange, onState, onHoles);
}
// The context the pages of events.js render with.
const ctx = { main, params, space, link: withSpace, apiParams, spaceParams };

// The live indicator in the header: in words and an icon, not colour alone.
const live = document.getElementById("live");
function setLive(state, detail) {
  live.dataset.state = state;
  live.querySelector("span[aria-hidden]").textContent = state === "live" ? "●" : "○";
  live.querySelector(".live-text").textContent =
    state === "live" ? "live" : state === "past" ? "the past" : state === "reconnecting" ? "reconnecting…" + (detail ? ` (${detail})` : "")
      : state === "snapshot" ? "not live: this page does not follow changes (reload it for newer ones)"
      : state === "connecting" ? "not live yet: connecting to the change stream…"
      : state === "stopped" ? "not live: the change stream stopped (reload the page)" : "not live";
  live.title = state === "snapshot" ? "The proposal list, a proposal's page, the statistics and the gap page follow the ledger live; this page shows what the ledger held when it was loaded." : "";
}

function showError(err, what) {
  clear(main);
  const msg = err instanceof HTTPError ? `${err.status}: ${err.message}` : String(err && err.message || err);
  main.append(h("section", { class: "error", role: "alert" },
    h("h1", {}, `Cannot show ${what}`), h("p", {}, msg),
    err instanceof HTTPError && err.status === 403 ? h("p", {}, "Your token does not hold the auditor role.") : null));
}

async function statusLine() {
  try {
    const st = await get("/v1/status");
    document.getElementById("status-line").textContent =
      `stream seq ${st.stream_seq} · projected ${st.projected_seq} · lag ${st.lag}`;
    return st;
  } catch { return null; }
}

// ---------------------------------------------------------------- list

const LIST_FILTERS = ["state", "proposer", "target", "anomaly", "form", "since", "until", "limit"];

async function listPage() {
  document.title = "Proposals · mewledger";
  const f = {};
  for (const k of LIST_FILTERS) if (params.get(k)) f[k] = params.get(k);
  const cursor = params.get("cursor") || "";
  const [page, stats] = await Promise.all([
    get("/v1/proposals?" + apiQuery(Object.assign({ limit: "50" }, f, { cursor }))),
    get("/v1/stats?" + apiQuery()),
  ]);
  clear(main);
  main.append(h("h1", {}, "Proposals", space ? h("span", { class: "sub" }, ` in space ${space}`) : null));

  // State counts: each a link that filters by the state.
  const counts = h("ul", { class: "counts", "aria-label": "Proposals by state" },
    h("li", {}, h("a", { href: withSpace("/ui/"), "aria-current": f.state ? null : "true" },
      h("span", { class: "count-n", id: "count-all" }, String(stats.proposals)), " all")),
    ...STATES.map((s) => h("li", {}, h("a", { href: withSpace("/ui/", { state: s }), "aria-current": f.state === s ? "true" : null, class: "st-" + s },
      stateBadge(s, true), " ", h("span", { class: "count-n", id: "count-" + s }, String(stats.by_state[s] || 0)), " ", s))));
  main.append(counts);
  main.append(filterForm(f));

  const banner = h("p", { class: "banner", hidden: true, role: "status" });
  main.append(banner);

  const rows = page.proposals.map(row);
  const table = h("table", { class: "list" },
    h("caption", { class: "visually-hidden" }, "Proposals, newest first"),
    h("thead", {}, h("tr", {}, ...["State", "Proposal", "Proposer", "To", "Method", "Anomalies", "Created", "Events"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...rows));
  if (!page.proposals.length) {
    main.append(h("p", { class: "empty" }, cursor ? "No more proposals." : "No proposal matches."));
  } else {
    main.append(h("div", { class: "table-wrap" }, table));
  }
  const nav = h("nav", { class: "pager", "aria-label": "Pages of proposals" });
  if (cursor) nav.append(h("a", { href: withSpace("/ui/", f), rel: "first" }, "⇤ First page"));
  if (page.next_cursor) nav.append(h("a", { href: withSpace("/ui/", Object.assign({}, f, { cursor: page.next_cursor })), rel: "next", id: "next-page" }, "Next page →"));
  main.append(nav);
  main.append(exportLinks(page.proposals.map((p) => Object.assign({ tool: toolOf(p), arg: mainArg(p) }, p)),
    ["id", "space", "state", "proposer", "to", "method", "tool", "arg", "anomalies", "created_seq", "created_at", "updated_seq", "decided_by", "reason", "events"], "proposals"));

  // Live: update the rows shown, the counts, and say when new ones arrived.
  const byID = new Map(page.proposals.map((p, i) => [p.id, rows[i]]));
  let fresh = 0;
  let refreshCounts = null;
  // The rows' hole marks follow the hole changes and the rows' changes
  // (the API works out hole_crossing): read the page again, a moment after
  // they stop coming, and mark its rows anew.
  let refreshMarks = null;
  const marksAgain = () => {
    clearTimeout(refreshMarks);
    refreshMarks = setTimeout(async () => {
      try {
        const again = await get("/v1/proposals?" + apiQuery(Object.assign({ limit: "50" }, f, { cursor })));
        for (const q of again.proposals) {
          const tr = byID.get(q.id);
          if (!tr) continue;
          const an = tr.querySelector(".c-anom");
          for (const m of an.querySelectorAll(".hole-mark")) m.remove();
          const m = crossingMark(q);
          if (m) an.append(m);
        }
      } catch { /* the next change retries */ }
    }, 300);
  };
  watch({ space }, (c) => {
    const tr = byID.get(c.id);
    if (tr) {
      updateRow(tr, c);
      announce(`${c.id} is now ${c.state}`);
      marksAgain();
    } else if (!c.prev_state) {
      fresh++;
      banner.hidden = false;
      clear(banner);
      banner.append(`${fresh} new proposal${fresh > 1 ? "s" : ""} since this page loaded. `,
        h("a", { href: location.pathname + location.search }, "Show them"));
    }
    clearTimeout(refreshCounts);
    refreshCounts = setTimeout(async () => {
      try {
        const st = await get("/v1/stats?" + apiQuery());
        document.getElementById("count-all").textContent = String(st.proposals);
        for (const s of STATES) document.getElementById("count-" + s).textContent = String(st.by_state[s] || 0);
      } catch { /* the next change retries */ }
    }, 300);
  }, setLive, (hc) => {
    announce(holeChangeText(hc));
    marksAgain();
  });
}

function filterForm(f) {
  const field = (name, label, input) => h("div", { class: "field" }, h("label", { for: "f-" + name }, label), input);
  const text = (name, ph) => h("input", { id: "f-" + name, name, value: f[name] || "", placeholder: ph || "", autocomplete: "off", spellcheck: "false" });
  const select = (name, opts) => h("select", { id: "f-" + name, name },
    h("option", { value: "" }, "any"), ...opts.map((o) => h("option", { value: o, selected: f[name] === o ? true : null }, o.replaceAll("_", " "))));
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter proposals" },
    field("state", "State", select("state", STATES)),
    field("proposer", "Proposer", text("proposer")),
    field("target", "Target (to)", text("target")),
    field("anomaly", "Anomaly", select("anomaly", Object.keys(ANOMALIES))),
    field("form", "Form", text("form", "e.g. bid")),
    field("since", "Created since", text("since", "2026-01-02T00:00:00Z")),
    field("until", "Created before", text("until", "RFC 3339")),
    h("div", { class: "field buttons" }, h("button", { type: "submit" }, "Filter"), h("a", { href: withSpace("/ui/") }, "Clear")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = {};
    for (const el of form.elements) if (el.name && el.value.trim()) q[el.name] = el.value.trim();
    location.assign(withSpace("/ui/", q));
  });
  return form;
}

function row(p) {
  const to = (p.targets && p.targets.length ? p.targets.map((t) => (typeof t === "string" ? t : t.id)) : p.to || []).join(", ");
  return h("tr", { "data-id": p.id, class: "st-" + p.state },
    h("td", { class: "c-state", "data-label": "State" }, stateBadge(p.state)),
    h("td", { class: "c-id", "data-label": "Proposal" }, h("a", { href: withSpace("/ui/proposals/" + encodeURIComponent(p.id)) }, p.id)),
    h("td", { "data-label": "Proposer" }, p.proposer),
    h("td", { "data-label": "To" }, to || "—"),
    h("td", { "data-label": "Method" }, h("code", {}, p.method || (p.kernel ? "kernel/" + p.kernel.action_type : "—")), toolOf(p) ? h("span", { class: "tool" }, " ", h("code", {}, toolOf(p)), mainArg(p) ? h("span", { class: "arg" }, " " + mainArg(p)) : null) : null),
    h("td", { class: "c-anom", "data-label": "Anomalies" }, anomalyCell(p.anomalies), crossingMark(p)),
    h("td", { "data-label": "Created" }, h("span", {}, h("time", { datetime: p.created_at, title: p.created_at }, relTime(p.created_at)), h("span", { class: "seq" }, ` #${p.created_seq}`))),
    h("td", { class: "c-events", "data-label": "Events" }, String(p.events)));
}

// toolOf is a tools/call's tool (params.name); mainArg its main argument
// (as the event index takes it: path, command, url, ... else the first
// string argument).
function toolOf(p) { return p && p.params && typeof p.params.name === "string" ? p.params.name : ""; }
const MAIN_ARGS = ["path", "file", "filename", "command", "cmd", "url", "uri", "query", "target", "name", "id"];
function mainArg(p) {
  const a = p && p.params && p.params.arguments;
  if (!a || typeof a !== "object") return "";
  for (const k of MAIN_ARGS) if (typeof a[k] === "string") return a[k].slice(0, 200);
  for (const k of Object.keys(a).sort()) if (typeof a[k] === "string") return a[k].slice(0, 200);
  return "";
}

function anomalyCell(list) {
  if (!list || !list.length) return h("span", { class: "none" }, "none");
  return h("ul", { class: "anoms" }, ...list.map((a) => h("li", { title: anomalyText(a) }, h("span", { "aria-hidden": "true" }, "⚠ "), a.replaceAll("_", " "))));
}

function updateRow(tr, c) {
  tr.className = "st-" + c.state + " flash";
  const st = tr.querySelector(".c-state");
  clear(st); st.append(stateBadge(c.state));
  const an = tr.querySelector(".c-anom");
  clear(an); an.append(anomalyCell(c.anomalies));
}

// ---------------------------------------------------------------- proposal

async function proposalPage(id) {
  document.title = `${id} · mewledger`;
  // The proposal and its history are asked for separately: an id that
  // names no proposal may still have a history (orphans waiting for it,
  // invalid or ignored events filed under it), and that is exactly what
  // an auditor came for.
  const notFound = (e) => { if (e instanceof HTTPError && e.status === 404) return null; throw e; };
  const [p, hist] = await Promise.all([
    get(`/v1/proposals/${encodeURIComponent(id)}?` + apiQuery()).catch(notFound),
    get(`/v1/proposals/${encodeURIComponent(id)}/history?` + apiQuery()).catch(notFound),
  ]);
  if (!p) {
    renderNoProposal(id, (hist && hist.events) || []);
    watchProposal(id, null);
    return;
  }
  renderProposal(p, hist ? hist.events || [] : []);
  watchProposal(id, p);
}

// renderNoProposal shows what is filed under an id that names no proposal:
// each event with its effect and the fold's reason.
function renderNoProposal(id, events) {
  clear(main);
  main.append(h("p", { class: "crumbs" }, h("a", { href: withSpace("/ui/") }, "← Proposals")));
  main.append(h("h1", {}, "No proposal ", h("code", {}, id)));
  if (!events.length) {
    main.append(h("p", {}, `The ledger has no proposal ${id} in ${space ? "space " + space : "the default space"}, and nothing is filed under that id. `,
      "Events that name it would show here (orphans waiting for it, invalid or ignored events)."));
    return;
  }
  main.append(h("p", { id: "no-proposal-note" }, `The ledger has no proposal ${id} in ${space ? "space " + space : "the default space"}, but ${events.length} event${events.length === 1 ? " is" : "s are"} filed under that id: `,
    "orphans waiting for it, or events the fold refused or ignored, with its reason."));
  const known = new Set(events.map((e) => e.id));
  main.append(h("section", { "aria-labelledby": "h-hist" }, h("h2", { id: "h-hist" }, `Events filed under ${id} (${events.length})`),
    h("ol", { class: "timeline" }, ...events.map((e) => timelineItem(e, known)))));
}

function watchProposal(id) {
  let pending = null;
  watch({ space, proposal: id }, (c) => {
    announce(`${c.id} is now ${c.state}` + (c.added && c.added.length ? `, anomaly ${c.added.join(", ")}` : ""));
    clearTimeout(pending);
    pending = setTimeout(async () => {
      try {
        const [p, hist] = await Promise.all([
          get(`/v1/proposals/${encodeURIComponent(id)}?` + apiQuery()),
          get(`/v1/proposals/${encodeURIComponent(id)}/history?` + apiQuery()),
        ]);
        renderProposal(p, hist.events || [], true);
      } catch (e) { console.error(e); }
    }, 100);
  }, setLive);
}

function dl(pairs) {
  const out = h("dl", { class: "facts" });
  for (const [k, v] of pairs) {
    if (v == null || v === "" || (Array.isArray(v) && !v.length)) continue;
    out.append(h("dt", {}, k), h("dd", {}, v));
  }
  return out;
}

function evLink(id, label) {
  return h("a", { href: "#ev-" + encodeURIComponent(id), class: "evlink" }, label || id);
}

function renderProposal(p, events, updated) {
  const focus = document.activeElement && document.activeElement.id;
  clear(main);
  const known = new Set(events.map((e) => e.id));
  const ref = (id) => (id && known.has(id) ? evLink(id) : id ? h("code", {}, id) : null);
  main.append(h("p", { class: "crumbs" }, h("a", { href: withSpace("/ui/") }, "← Proposals")));
  main.append(h("h1", { class: "ptitle" }, h("code", {}, p.id), " ", stateBadge(p.state, false, "big")));
  if (updated) main.append(h("p", { class: "banner", role: "status" }, `Updated live at seq ${p.updated_seq}.`));

  const targets = p.targets && p.targets.length ? p.targets : p.to;
  const ex = p.exclusive;
  const facts = [
    ["State", h("span", { id: "p-state" }, p.state)],
    ["Proposer", p.proposer],
    ["To (targets)", targets && targets.length ? targets.map(targetText).join(", ") : "anyone (no to)"],
    ["Exclusive", ex ? `only the targets may fulfil${ex.until ? " until " + fmtTime(ex.until) : ""}` +
      (ex.fallback_to_broadcast ? ", then anyone" : ex.until ? ", then still only the targets" : "") : null],
    ["Forms", p.forms && p.forms.length ? p.forms.join(", ") : null],
    ["Method", p.method ? h("code", {}, p.method) : null],
    ["Space", p.space],
    ["Kind / dialect", `${p.kind || "?"} · ${p.dialect || "?"}`],
    ["Created", h("span", {}, fmtTime(p.created_at), h("span", { class: "seq" }, ` seq ${p.created_seq}`))],
    ["Last change", h("span", {}, fmtTime(p.updated_at), h("span", { class: "seq" }, ` seq ${p.updated_seq}`))],
    ["Decided by", p.decided_by ? h("span", {}, h("a", { href: withSpace("/ui/events", { from: p.decided_by, effect: "applied" }), title: "events this participant decided" }, p.decided_by), " with ", ref(p.decided_event), decidedAt(p, events), p.reason ? h("span", {}, " (reason: ", h("a", { href: withSpace("/ui/events", { reason: p.reason }) }, p.reason), ")") : "") : null],
    ["Expires", p.expires_at ? fmtTime(p.expires_at) : null],
    ["Events in history", retriesOf(events).length
      ? h("span", { id: "p-events" }, `${p.events} (${p.events - retriesOf(events).length} and ${retriesOf(events).length} stored ${retriesOf(events).length === 1 ? "retry" : "retries"} of them)`)
      : h("span", { id: "p-events" }, String(p.events))],
  ];
  main.append(h("section", { "aria-labelledby": "h-facts" }, h("h2", { id: "h-facts", class: "visually-hidden" }, "Facts"), dl(facts)));
  // Whether its lifecycle crosses a recording hole (holes_ui.js).
  main.append(holeCrossing(p, { link: withSpace, past }));

  if (p.params !== undefined && p.params !== null) {
    main.append(h("details", { class: "params" }, h("summary", {}, "Parameters"), h("pre", {}, JSON.stringify(p.params, null, 2))));
  }

  // Approval (kernel proposals).
  if (p.kernel) {
    const k = p.kernel;
    main.append(h("section", { "aria-labelledby": "h-appr" }, h("h2", { id: "h-appr" }, "Approval"),
      dl([
        ["Action", h("code", {}, k.action_type)],
        ["Target", k.target ? `${k.target.resource_type}/${k.target.resource_id}${k.target.domain ? " in " + k.target.domain : ""}` : null],
        ["Class", k.approval_class],
        ["Approvals", `${k.approvals_counted} of ${k.approvals_required} needed` + (k.approvers && k.approvers.length ? ` (approvers: ${k.approvers.join(", ")})` : "")],
        ["Approved", p.approved === true ? "✔ yes" : p.approved === false ? "✖ not yet" : null],
      ]),
      p.approvals && p.approvals.length ? h("ul", { class: "plain" }, ...p.approvals.map((a) =>
        h("li", {}, ref(a.event), ` by ${a.from}: `, a.counted ? "counted" : `not counted (${a.why || (a.late ? "late" : "?")})`))) : null));
  }

  // Anomalies, each in words.
  main.append(h("section", { "aria-labelledby": "h-anom", class: "anomalies" }, h("h2", { id: "h-anom" }, "Anomalies"),
    p.anomalies && p.anomalies.length
      ? h("ul", {}, ...p.anomalies.map((a) => h("li", { "data-anomaly": a }, h("strong", {}, "⚠ " + a.replaceAll("_", " ")), " — ", anomalyText(a))))
      : h("p", { class: "none" }, "None: nothing an auditor must look at.")));

  // Decisions: rejections, withdrawal, fulfilments.
  const dec = h("section", { "aria-labelledby": "h-dec" }, h("h2", { id: "h-dec" }, "Decisions"));
  let any = false;
  for (const r of p.rejections || []) {
    any = true;
    dec.append(h("div", { class: "card rej" }, h("p", {}, "✖ Rejected by ", h("strong", {}, r.from), " with ", ref(r.event),
      r.reason ? ` — reason ${r.reason}` : "", r.late ? " (late: after another decision)" : ""),
    r.explanation ? h("blockquote", { class: "explanation" }, r.explanation) : null));
  }
  if (p.withdrawal) {
    any = true;
    const w = p.withdrawal;
    dec.append(h("div", { class: "card wd" }, h("p", {}, "↶ Withdrawn by ", h("strong", {}, w.from), " with ", ref(w.event), w.reason ? ` — reason ${w.reason}` : ""),
      w.explanation ? h("blockquote", { class: "explanation" }, w.explanation) : null));
  }
  for (const f of p.fulfillments || []) {
    any = true;
    const responses = f.responses && f.responses.length ? f.responses : f.response ? [{ event: f.response, outcome: f.outcome }] : [];
    dec.append(h("div", { class: "card ful" },
      h("p", {}, "✔ Fulfilled by ", h("strong", {}, f.from), " with ", ref(f.event), f.to && f.to.length ? ` (to ${f.to.join(", ")})` : "", f.late ? " (late)" : "",
        " — outcome: ", h("strong", { class: "outcome" }, f.outcome || "no response yet")),
      f.anomalies && f.anomalies.length ? h("p", {}, "⚠ " + f.anomalies.join(", ")) : null,
      responses.length ? h("ul", { class: "plain" }, ...responses.map((r) =>
        h("li", {}, "response ", ref(r.event), r.from ? ` from ${r.from}` : "", r.outcome ? `: ${r.outcome}` : ""))) : null));
  }
  if (!any) dec.append(h("p", { class: "none" }, p.state === "pending" ? "Pending: no decision yet." : "No decision recorded."));
  main.append(dec);

  // What participants said about it: statuses, acceptances, deferrals, bids.
  const said = [];
  for (const st of p.statuses || []) {
    said.push(h("li", {}, h("strong", {}, st.from), ` is ${st.status} (`, ref(st.event), ")"));
  }
  for (const [list, word] of [[p.acceptances, "accepted"], [p.deferrals, "deferred"], [p.bids, "bid"]]) {
    for (const n of list || []) {
      const extra = [n.reason ? `reason ${n.reason}` : "", n.confidence != null ? `confidence ${n.confidence}` : "",
        n.estimated_time != null ? `estimated time ${n.estimated_time}` : "", n.late ? "late" : ""].filter(Boolean).join(", ");
      said.push(h("li", {}, h("strong", {}, n.from), ` ${word} with `, ref(n.event), extra ? ` (${extra})` : ""));
    }
  }
  if (said.length) {
    main.append(h("section", { "aria-labelledby": "h-said" }, h("h2", { id: "h-said" }, "Participants"), h("ul", { class: "plain said" }, ...said)));
  }

  // History as a timeline; stored retries (duplicates: the same envelope
  // stored again) apart, so that the count of what happened is plain.
  const retries = retriesOf(events);
  const rest = events.filter((e) => e.effect !== "duplicate");
  main.append(h("section", { "aria-labelledby": "h-hist" }, h("h2", { id: "h-hist" }, `History (${rest.length} event${rest.length === 1 ? "" : "s"}${retries.length ? `, and ${retries.length} stored ${retries.length === 1 ? "retry" : "retries"} below` : ""})`),
    h("ol", { class: "timeline" }, ...rest.map((e) => timelineItem(e, known)))));
  if (retries.length) {
    main.append(h("section", { "aria-labelledby": "h-retries", id: "retries" }, h("h2", { id: "h-retries" }, `Stored retries (${retries.length})`),
      h("p", { class: "detail" }, "The same envelope again (same id and content): stored in the log, counted in Events, changed nothing."),
      h("ol", { class: "timeline retries" }, ...retries.map((e) => timelineItem(e, known)))));
  }
  // The proposal's inclusion proof, checked in this browser (verify.js).
  main.append(evidenceSection(p.id, events, { query: liveQuery(), past, statusLink: withSpace("/ui/status") }));
  if (focus) { const el = document.getElementById(focus); if (el) el.focus(); }
}

// decidedAt is " at <time> seq N" of the event that decided p (from its
// history), or "".
function decidedAt(p, events) {
  const e = events.find((x) => p.decided_seq ? x.seq === p.decided_seq : x.id === p.decided_event && x.effect === "applied");
  if (!e || !e.at) return "";
  return h("span", { id: "p-decided-at" }, " at ", h("time", { datetime: e.at }, fmtTime(e.at)), h("span", { class: "seq" }, ` seq ${e.seq}`));
}

function retriesOf(events) { return events.filter((e) => e.effect === "duplicate"); }

const TYPE_ICON = { proposal: "✚", fulfil: "▶", response: "↩", reject: "✖", withdraw: "↶", note: "✎", approve: "✓", expire: "⊘", gap: "⋯" };

function timelineItem(e, known) {
  const target = e.target ? (known.has(e.target) ? evLink(e.target) : h("code", {}, e.target)) : null;
  const body = [];
  if (e.reason) body.push(h("p", {}, "Reason: ", h("strong", {}, e.reason)));
  if (e.text) body.push(h("blockquote", { class: "explanation" }, e.text));
  if (e.outcome) body.push(h("p", {}, "Outcome: ", h("strong", { class: "outcome" }, e.outcome)));
  if (e.code) body.push(h("p", {}, "Refusal: ", h("code", {}, e.code)));
  if (e.detail) body.push(h("p", { class: "detail" }, e.detail));
  if (e.anomalies && e.anomalies.length) body.push(h("p", { class: "anom" }, "⚠ raised: " + e.anomalies.join(", ")));
  if (e.form) body.push(h("p", { class: "detail" }, "form: " + e.form + (e.status ? `, status ${e.status}` : "")));
  else if (e.status) body.push(h("p", {}, "Status: ", h("strong", {}, e.status)));
  if (e.note) body.push(h("p", { class: "detail" }, e.note));
  if (e.resolved_seq) body.push(h("p", { class: "orphan-note" }, `Arrived as an orphan at seq ${e.seq}; applied when seq ${e.resolved_seq} arrived.`));
  return h("li", { id: "ev-" + (e.id || "seq-" + e.seq) + (e.effect === "duplicate" ? "-retry-" + e.seq : ""), "data-seq": String(e.seq), class: "ev ev-" + e.type + " eff-" + e.effect, tabindex: "-1" },
    h("div", { class: "ev-head" },
      h("span", { class: "ev-icon", "aria-hidden": "true" }, TYPE_ICON[e.type] || "•"),
      h("span", { class: "ev-type" }, e.type),
      " ", h("code", { class: "ev-id" }, e.id || "(no id)"),
      " from ", h("strong", {}, e.from || "?"),
      target ? h("span", {}, " → ", target) : null,
      " ", effectBadge(e.effect)),
    h("div", { class: "ev-meta" }, h("a", { href: withSpace("/ui/events/" + e.seq), class: "seqlink", title: "the stored message, raw" }, `seq ${e.seq}`), " · ", h("time", { datetime: e.at }, fmtTime(e.at)), e.kind ? ` · ${e.kind}` : ""),
    ...body);
}

// ---------------------------------------------------------------- stats

let statsWatch = null;
async function statsPage() {
  document.title = "Statistics · mewledger";
  if (!statsWatch) {
    // Live: draw the page again a moment after changes stop coming.
    let again = null;
    statsWatch = watch({ space }, () => {
      clearTimeout(again);
      again = setTimeout(() => statsPage().catch((e) => showError(e, "statistics")), 1500);
    }, setLive);
  }
  const win = Number(params.get("window") || "20000");
  const [stats, st] = await Promise.all([get("/v1/stats?" + apiQuery()), statusLine()]);
  clear(main);
  main.append(h("h1", {}, "Statistics", space ? h("span", { class: "sub" }, ` of space ${space}`) : null));
  const grid = h("div", { class: "grid" });
  main.append(grid);
  const card = (title, id, content) => h("section", { class: "chart-card", "aria-labelledby": id }, h("h2", { id }, title), content);
  grid.append(card(`Proposals by state (${stats.proposals.toLocaleString("en")})`, "h-bystate",
    barChart(STATES.map((s) => ({ label: s, value: stats.by_state[s] || 0, cls: "st-" + s })), "Proposals by state")));
  const an = Object.entries(stats.anomalies || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
  grid.append(card("Proposals with each anomaly", "h-anom",
    an.length ? barChart(an.map(([k, v]) => ({ label: k.replaceAll("_", " "), value: v, cls: "anomaly" })), "Anomalies") : h("p", { class: "none" }, "No anomalies.")));
  // Every count links to what it counts: the events behind it (the event
  // browser) or the proposals.
  const table = (title, id, m, linkOf) => {
    const e = Object.entries(m || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    return card(title, id, e.length ? h("table", { class: "kv", id: id + "-t" }, h("tbody", {}, ...e.map(([k, v]) => {
      const to = linkOf ? linkOf(k) : null;
      return h("tr", { "data-key": k }, h("th", { scope: "row" }, to ? h("a", { href: to }, k) : k), h("td", {}, to ? h("a", { href: to }, String(v)) : String(v)));
    })))
      : h("p", { class: "none" }, "None."));
  };
  const evLinkTo = (extra) => withSpace("/ui/events", extra);
  const typeLink = (k) => (k === "invalid" ? evLinkTo({ effect: "invalid" }) : evLinkTo({ type: k }));
  const reasonLink = (type) => (k) => (k === "other" ? evLinkTo({ type }) : evLinkTo({ type, reason: k }));
  grid.append(table(`Events by type (${stats.events.toLocaleString("en")})`, "h-types", stats.events_by_type, typeLink));
  grid.append(table("Effects", "h-eff", stats.effects, (k) => evLinkTo({ effect: k })));
  grid.append(table("Rejection reasons", "h-rr", stats.rejection_reasons, reasonLink("reject")));
  grid.append(table("Withdrawal reasons", "h-wr", stats.withdrawal_reasons, reasonLink("withdraw")));
  grid.append(table("Proposals by state", "h-st", stats.by_state, (k) => withSpace("/ui/", { state: k })));
  grid.append(table("Proposals by anomaly", "h-an", stats.anomalies, (k) => withSpace("/ui/", { anomaly: k })));
  if (stats.note_kinds && Object.keys(stats.note_kinds).length) grid.append(table("Notes by kind", "h-nk", stats.note_kinds));
  main.insertBefore(h("p", { class: "detail" }, "Every count is a link to what it counts; ", h("a", { href: evLinkTo({}), id: "all-events" }, `all ${stats.events.toLocaleString("en")} events`), "."), grid);
  if (stats.gaps != null) grid.append(card("Recording gaps", "h-gaps", h("p", {}, h("a", { href: withSpace("/ui/gaps") },
    `${typeof stats.gaps === "object" ? JSON.stringify(stats.gaps) : stats.gaps} gap${stats.gaps === 1 ? "" : "s"}`), " where a recorder's record may be incomplete",
    stats.gaps ? `; ${stats.covered_gaps || 0} covered by another recorder` : "",
    stats.holes ? h("span", { class: "bad", id: "stats-holes" }, `; ${stats.holes} hole${stats.holes === 1 ? "" : "s"} where none was recording`) : "")));

  // Over time: the change index of the last `window` sequences, read in
  // pages (never the whole log unless asked). The change index answers
  // only now: in the past, the charts stop at the as-of sequence.
  let through = st ? st.projected_seq : 0;
  if (asOfSeq) through = Math.min(through, Number(asOfSeq));
  if (asOfTime) {
    grid.append(h("section", { class: "chart-card wide" }, h("h2", {}, "Over time"), h("p", { class: "none" }, "Charts over time are shown as of a sequence, not a time: give the control a sequence.")));
    return;
  }
  const from = win > 0 && through > win ? through - win : 0;
  const sec = h("section", { class: "chart-card wide", "aria-labelledby": "h-time" },
    h("h2", { id: "h-time" }, "Over time"),
    h("p", { class: "detail" }, `Changes of state, and anomalies raised, from seq ${from + 1} to ${through}. `,
      "Window: ", ...[5000, 20000, 100000, 0].map((w) => h("a", { href: withSpace("/ui/stats", { window: String(w) }), "aria-current": w === win ? "true" : null, class: "win" }, w ? `last ${w.toLocaleString("en")} seq` : "whole log"))));
  grid.append(sec);
  const holder = h("div", {}, h("p", { class: "loading" }, "Reading changes…"));
  sec.append(holder);
  const changes = [];
  let after = from;
  let more = false;
  for (let i = 0; i < 200; i++) { // at most 200,000 changes
    const page = await get("/v1/changes?" + liveQuery({ since_seq: String(after), limit: "1000" }));
    changes.push(...page.changes.filter((c) => c.seq <= through));
    after = page.through;
    more = page.more && after < through;
    if (!more) break;
  }
  clear(holder);
  if (more) holder.append(h("p", { class: "detail" }, `Showing the first ${changes.length.toLocaleString("en")} changes of the window (up to seq ${after}); choose a smaller window for the latest.`));
  if (!changes.length) { holder.append(h("p", { class: "none" }, "No changes in this window.")); return; }
  holder.append(stackedTimeChart(changes, (c) => (c.prev_state === c.state ? null : c.state), STATES.map((s) => ({ key: s, cls: "st-" + s })), "New state of proposals over time"));
  const anKeys = [...new Set(changes.flatMap((c) => c.added || []))];
  holder.append(anKeys.length
    ? stackedTimeChart(changes, (c) => c.added || [], anKeys.map((k) => ({ key: k, cls: "anomaly a" + (anKeys.indexOf(k) % 6) })), "Anomalies raised over time")
    : h("p", { class: "none" }, "No anomalies raised in this window."));
}

// ---------------------------------------------------------------- gaps

// The gap page follows the hole changes of the space live (`event: holes`
// of /v1/watch): a hole opening, bounded or healed draws the page again,
// saying so. The watch starts at the position the page was read at, so a
// change between the read and the stream's start is not missed.
let gapsWatch = null;
let gapsDrawn = 0;
async function gapsPage(change) {
  document.title = "Recording gaps · mewledger";
  const drawing = ++gapsDrawn;
  let since = null;
  if (!gapsWatch && !past) {
    try { since = (await get("/v1/status")).projected_seq; } catch { since = null; }
  }
  const cursor = params.get("cursor") || "";
  const [holes, gapsBody] = await Promise.all([holesSection(ctx),
    get("/v1/gaps?" + apiQuery({ cursor })).catch((e) => { if (e instanceof HTTPError && e.status === 404) return null; throw e; })]);
  if (drawing !== gapsDrawn) return; // a later change draws the page
  clear(main);
  main.append(h("h1", {}, "Recording gaps", space ? h("span", { class: "sub" }, ` of space ${space}`) : null),
    h("p", { class: "detail" }, "Bridges and --history followers record a live MEW space; while a recorder is disconnected, what the space says may be lost to it. " +
      "Each gap says where its record may be incomplete; a gap another recorder recorded through is covered. Where none was recording, the gap is part of a hole."));
  if (change) main.append(h("p", { class: "banner", role: "status", id: "holes-live", "data-seq": String(change.seq) }, holeChangeText(change)));
  const inHole = new Set();
  for (const x of holes.holes) for (const g of x.gaps || []) inHole.add(g);
  main.append(holes.section);
  if (!gapsWatch && !past) {
    let again = null;
    gapsWatch = watch(since != null ? { space, since_seq: String(since) } : { space }, null, setLive, (c) => {
      announce(holeChangeText(c));
      clearTimeout(again);
      again = setTimeout(() => gapsPage(c).catch((e) => showError(e, "the recording gaps")), 200);
    });
  }
  main.append(h("h2", { id: "h-gaplist" }, "Gaps"));
  if (!gapsBody) {
    main.append(h("p", { class: "none", id: "no-gaps" }, "No gaps: this ledger reports none (it does not record gaps)."));
    return;
  }
  const gaps = Array.isArray(gapsBody) ? gapsBody : gapsBody.gaps || [];
  const next = gapsBody.next_cursor || "";
  if (!gaps.length) {
    main.append(h("p", { class: "none", id: "no-gaps" }, "No gaps recorded."));
    return;
  }
  const preferred = ["seq", "bridge", "covered", "disconnected_at", "reconnected_at", "last_envelope", "reason", "mew_space", "gateway", "at"];
  const all = [...new Set(["covered", ...gaps.flatMap((g) => Object.keys(g))])];
  const keys = [...preferred.filter((k) => all.includes(k)), ...all.filter((k) => !preferred.includes(k) && k !== "id" && k !== "covered_by")];
  const label = (k) => (k === "at" ? "recorded at" : k === "seq" ? "seq" : k.replaceAll("_", " "));
  main.append(h("div", { class: "table-wrap" }, h("table", { class: "list gaps" },
    h("thead", {}, h("tr", {}, ...keys.map((k) => h("th", { scope: "col" }, label(k))))),
    h("tbody", {}, ...gaps.map((g) => h("tr", { title: g.id || null, "data-gap": g.id || null, "data-seq": String(g.seq) }, ...keys.map((k) => h("td", { "data-label": label(k), class: "g-" + k },
      k === "covered" ? coveredCell(g, inHole) : g[k] == null || g[k] === "" ? "—" : typeof g[k] === "object" ? JSON.stringify(g[k]) : /(^|_)at$/.test(k) ? fmtTime(g[k]) : String(g[k])))))))));
  const nav = h("nav", { class: "pager", "aria-label": "Pages of gaps" });
  if (cursor) nav.append(h("a", { href: withSpace("/ui/gaps"), rel: "first" }, "⇤ First page"));
  if (next) nav.append(h("a", { href: withSpace("/ui/gaps", { cursor: next }), rel: "next" }, "Next page →"));
  main.append(nav);
}

// ---------------------------------------------------------------- time travel

// timeTravel wires the header's as-of control (a sequence or a time) and,
// in the past, marks the whole page and offers the way back to now.
function timeTravel() {
  const form = document.getElementById("asof-form");
  const input = document.getElementById("asof-input");
  input.value = asOfSeq || asOfTime;
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const v = input.value.trim();
    const q = new URLSearchParams(location.search);
    q.delete("as_of_seq"); q.delete("as_of"); q.delete("cursor");
    if (/^\d+$/.test(v)) q.set("as_of_seq", v);
    else if (v) q.set("as_of", v);
    const s = q.toString();
    location.assign(location.pathname + (s ? "?" + s : ""));
  });
  if (!past) return;
  document.body.classList.add("past");
  const now = new URLSearchParams(location.search);
  now.delete("as_of_seq"); now.delete("as_of"); now.delete("cursor");
  const back = location.pathname + (now.toString() ? "?" + now : "");
  const bar = h("div", { class: "past-bar", role: "note", id: "past-bar" },
    h("strong", {}, "◀ The past: "), `this is the ledger as of ${asOfSeq ? "seq " + asOfSeq : asOfTime}, not now. Nothing here is live. `,
    h("a", { href: back, id: "back-to-now" }, "Back to now →"));
  document.querySelector("header.top").after(bar);
  setLive("past");
}

// ---------------------------------------------------------------- routing

function keyboard() {
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    if (e.key === "/") {
      const f = document.querySelector(".filters input, .filters select");
      if (f) { e.preventDefault(); f.focus(); }
    } else if (e.key === "g") {
      location.assign(withSpace("/ui/"));
    } else if (e.key === "e") {
      location.assign(withSpace("/ui/events"));
    } else if (e.key === "t") {
      e.preventDefault();
      document.getElementById("asof-input").focus();
    } else if (e.key === "j" || e.key === "k") {
      const links = [...document.querySelectorAll("table.list td.c-id a, ol.timeline > li")];
      if (!links.length) return;
      const i = links.indexOf(document.activeElement);
      const n = e.key === "j" ? Math.min(links.length - 1, i + 1) : Math.max(0, i - 1);
      links[n].focus();
      e.preventDefault();
    }
  });
}

async function route() {
  const sf = document.getElementById("space-input");
  sf.value = space;
  sf.placeholder = "default";
  document.getElementById("space-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (sf.value.trim()) q.set("space", sf.value.trim());
    location.assign("/ui/" + (q.toString() ? "?" + q : ""));
  });
  for (const a of document.querySelectorAll("a[data-nav]")) {
    a.href = withSpace(a.getAttribute("href"));
  }
  document.getElementById("brand").href = withSpace("/ui/");
  timeTravel();
  if (!past) setLive("connecting"); // until the page's change stream answers (or the page says it has none)
  keyboard();
  const path = location.pathname.replace(/^\/ui\/?/, "");
  let nav = "list";
  try {
    if (path.startsWith("proposals/")) {
      nav = "";
      await proposalPage(decodeURIComponent(path.slice("proposals/".length)));
    } else if (path === "stats") {
      nav = "stats";
      await statsPage();
    } else if (path === "gaps") {
      nav = "gaps";
      await gapsPage();
    } else if (path === "events") {
      nav = "events";
      await eventsPage(ctx);
    } else if (path.startsWith("events/")) {
      nav = "events";
      await eventPage(ctx, decodeURIComponent(path.slice("events/".length)));
    } else if (path === "status") {
      nav = "status";
      await statusPage(ctx);
    } else {
      await listPage();
    }
  } catch (e) {
    showError(e, nav || "the proposal");
  }
  for (const a of document.querySelectorAll("a[data-nav]")) {
    if (a.dataset.nav === nav) a.setAttribute("aria-current", "page");
  }
  if (nav !== "stats" && nav !== "status") statusLine();
  // Pages that do not follow the change stream say so, and why.
  if (!past && (nav === "events" || nav === "status")) setLive("snapshot");
  document.body.dataset.ready = "true";
}

route();
