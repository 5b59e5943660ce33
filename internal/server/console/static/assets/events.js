// The auditor's workbench for the log itself: the event browser over
// GET /v1/events, one event's stored message byte for byte
// (GET /v1/events/{seq}), the status page, and the export of what a page
// lists as CSV or NDJSON. app.js routes to these pages and passes the
// page context (where to render, the space, the as-of point).
import { get, getText, HTTPError } from "./api.js";
import { h, clear, effectBadge, fmtTime, anomalyText, ANOMALIES } from "./ui.js";
import { integrityPanel } from "./verify_ui.js";
import { cosignersPanel, witnessStatus } from "./witness_ui.js";

export const EFFECTS = ["applied", "recorded", "duplicate", "late", "unauthorized", "invalid", "orphan", "ignored"];
export const TYPES = ["proposal", "withdraw", "reject", "fulfil", "response", "note", "approve", "expire", "gap", "ignored"];

// The event browser's filters, as the API names them.
export const EVENT_FILTERS = ["effect", "type", "kind", "form", "from", "proposal", "event", "tool", "reason", "code",
  "anomaly", "since", "until", "since_seq", "until_seq", "order", "limit"];

// ---------------------------------------------------------------- export

function csvCell(v) {
  const s = v == null ? "" : Array.isArray(v) ? v.join(" ") : typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

// toCSV renders rows (objects) as RFC 4180 CSV with the given columns.
export function toCSV(rows, columns) {
  const lines = [columns.map(csvCell).join(",")];
  for (const r of rows) lines.push(columns.map((c) => csvCell(r[c])).join(","));
  return lines.join("\r\n") + "\r\n";
}

export function toNDJSON(rows) {
  return rows.map((r) => JSON.stringify(r)).join("\n") + (rows.length ? "\n" : "");
}

// exportLinks returns the page's download links: what it lists (rows, the
// API's objects) as CSV (columns) and as NDJSON, named name.csv/.ndjson.
export function exportLinks(rows, columns, name) {
  const link = (text, type, ext, id) => {
    const url = URL.createObjectURL(new Blob([text], { type }));
    return h("a", { href: url, download: `${name}.${ext}`, id, class: "export" }, `⤓ ${ext.toUpperCase()}`);
  };
  return h("p", { class: "exports" }, `Export the ${rows.length} row${rows.length === 1 ? "" : "s"} shown: `,
    link(toCSV(rows, columns), "text/csv;charset=utf-8", "csv", "export-csv"), " ",
    link(toNDJSON(rows), "application/x-ndjson", "ndjson", "export-ndjson"));
}

// ---------------------------------------------------------------- browser

function reasonText(e) {
  const parts = [];
  if (e.reason) parts.push(`reason ${e.reason}`);
  if (e.code) parts.push(e.code);
  if (e.detail && e.effect !== "applied") parts.push(e.detail);
  return parts.join(": ");
}

export async function eventsPage(c) {
  document.title = "Events · mewledger";
  const f = {};
  for (const k of EVENT_FILTERS) if (c.params.get(k)) f[k] = c.params.get(k);
  const everySpace = c.params.get("all_spaces") === "1";
  const cursor = c.params.get("cursor") || "";
  const q = c.apiParams(Object.assign({ limit: "50" }, f, { cursor }));
  if (everySpace) q.set("space", "*");
  const page = await get("/v1/events?" + q.toString());
  const main = c.main;
  clear(main);
  main.append(h("h1", {}, "Events", h("span", { class: "sub" }, everySpace ? " of every space" : c.space ? ` in space ${c.space}` : " in the default space")),
    h("p", { class: "detail" }, "Every stored message of the log, in stream order, with what the fold did with it — invalid, ignored and orphaned events included."));
  main.append(findForm(c, f, everySpace), eventFilterForm(c, f, everySpace));
  const evs = page.events || [];
  if (!evs.length) {
    main.append(h("p", { class: "empty", id: "no-events" }, cursor ? "No more events." : "No event matches."));
  } else {
    main.append(h("div", { class: "table-wrap" }, h("table", { class: "list events" },
      h("caption", { class: "visually-hidden" }, "Events"),
      h("thead", {}, h("tr", {}, ...["Seq", "Stored", "Event", "Type", "From", "Tool / argument", "Effect", "Filed under", "Anomalies", "Why"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, ...evs.map((e) => eventRow(c, e))))));
  }
  const keep = Object.assign({}, f, everySpace ? { all_spaces: "1" } : {});
  const nav = h("nav", { class: "pager", "aria-label": "Pages of events" });
  if (cursor) nav.append(h("a", { href: c.link("/ui/events", keep), rel: "first" }, "⇤ First page"));
  if (page.next_cursor) nav.append(h("a", { href: c.link("/ui/events", Object.assign({}, keep, { cursor: page.next_cursor })), rel: "next", id: "next-page" }, "Next page →"));
  main.append(nav);
  main.append(exportLinks(evs, ["seq", "at", "space", "id", "type", "kind", "form", "from", "tool", "arg", "effect", "effects", "proposals", "anomalies", "reason", "code", "detail", "digest"], "events"));
}

function eventRow(c, e) {
  const seqLink = h("a", { href: c.link("/ui/events/" + e.seq, { space: e.space }) }, String(e.seq));
  return h("tr", { "data-seq": String(e.seq), class: "eff-" + e.effect },
    h("td", { class: "c-id c-seq", "data-label": "Seq" }, seqLink),
    h("td", { "data-label": "Stored" }, h("time", { datetime: e.at }, fmtTime(e.at)), e.space && e.space !== (c.space || "default") ? h("span", { class: "seq" }, ` ${e.space}`) : null),
    h("td", { "data-label": "Event" }, e.id ? h("code", {}, e.id) : h("span", { class: "none" }, "no id")),
    h("td", { "data-label": "Type" }, e.type || "—", e.kind ? h("span", { class: "seq" }, ` ${e.kind}`) : null),
    h("td", { "data-label": "From" }, e.from || "—"),
    h("td", { class: "c-tool", "data-label": "Tool / argument" }, e.tool ? h("code", {}, e.tool) : e.method ? h("code", {}, e.method) : "—", e.arg ? h("span", { class: "arg" }, " " + e.arg) : null),
    h("td", { "data-label": "Effect" }, effectBadge(e.effect)),
    h("td", { "data-label": "Filed under" }, ...(e.proposals || []).flatMap((p, i) => [i ? ", " : "", h("a", { href: c.link("/ui/proposals/" + encodeURIComponent(p), { space: e.space }) }, p)])),
    h("td", { class: "c-anom", "data-label": "Anomalies" }, (e.anomalies || []).length ? h("ul", { class: "anoms" }, ...e.anomalies.map((a) => h("li", { title: anomalyText(a) }, "⚠ " + a.replaceAll("_", " ")))) : h("span", { class: "none" }, "none")),
    h("td", { class: "c-why", "data-label": "Why" }, reasonText(e) || "—"));
}

const FIND = [["proposal", "proposal id"], ["event", "event id"], ["from", "sender"], ["tool", "tool name"]];

function findForm(c, f, everySpace) {
  const sel = h("select", { id: "find-what", name: "what", "aria-label": "Search by" }, ...FIND.map(([k, l]) => h("option", { value: k, selected: f[k] ? true : null }, l)));
  const cur = FIND.find(([k]) => f[k]);
  const input = h("input", { id: "find-input", name: "q", value: cur ? f[cur[0]] : "", placeholder: "id, sender or tool", autocomplete: "off", spellcheck: "false" });
  const form = h("form", { class: "filters find", role: "search", "aria-label": "Search events" },
    h("div", { class: "field" }, h("label", { for: "find-what" }, "Search by"), sel),
    h("div", { class: "field" }, h("label", { for: "find-input" }, "for"), input),
    h("div", { class: "field buttons" }, h("button", { type: "submit" }, "Search")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = {};
    if (input.value.trim()) q[sel.value] = input.value.trim();
    if (everySpace) q.all_spaces = "1";
    location.assign(c.link("/ui/events", q));
  });
  return form;
}

function eventFilterForm(c, f, everySpace) {
  const field = (name, label, input) => h("div", { class: "field" }, h("label", { for: "ef-" + name }, label), input);
  const text = (name, ph) => h("input", { id: "ef-" + name, name, value: f[name] || "", placeholder: ph || "", autocomplete: "off", spellcheck: "false" });
  const select = (name, opts, any) => h("select", { id: "ef-" + name, name },
    h("option", { value: "" }, any || "any"), ...opts.map((o) => h("option", { value: o, selected: f[name] === o ? true : null }, o.replaceAll("_", " "))));
  const all = h("input", { id: "ef-all", type: "checkbox", name: "all_spaces", value: "1", checked: everySpace ? true : null });
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter events" },
    field("effect", "Effect", select("effect", EFFECTS)),
    field("type", "Type", select("type", TYPES)),
    field("kind", "Kind", text("kind", "mcp/request")),
    field("form", "Form", text("form")),
    field("from", "Sender (decider)", text("from")),
    field("proposal", "Filed under", text("proposal", "proposal id")),
    field("event", "Event id", text("event")),
    field("tool", "Tool", text("tool", "params.name")),
    field("reason", "Reason", text("reason", "e.g. unsafe")),
    field("code", "Refusal code", text("code", "e.g. not_json")),
    field("anomaly", "Anomaly", select("anomaly", Object.keys(ANOMALIES))),
    field("since", "Stored since", text("since", "RFC 3339")),
    field("until", "Stored until", text("until", "RFC 3339")),
    field("since_seq", "From seq", text("since_seq")),
    field("until_seq", "To seq", text("until_seq")),
    field("order", "Order", select("order", ["desc"], "oldest first")),
    h("div", { class: "field check" }, h("label", { for: "ef-all" }, all, " every space")),
    h("div", { class: "field buttons" }, h("button", { type: "submit" }, "Filter"), h("a", { href: c.link("/ui/events") }, "Clear")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = {};
    for (const el of form.elements) {
      if (!el.name || el.name === "all_spaces") continue;
      if (el.value.trim()) q[el.name] = el.value.trim();
    }
    if (all.checked) q.all_spaces = "1";
    location.assign(c.link("/ui/events", q));
  });
  return form;
}

// ---------------------------------------------------------------- one event

function b64bytes(s) {
  const bin = atob(s || "");
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function hexdump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = [...bytes.slice(i, i + 16)];
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const asc = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${asc}`);
  }
  return lines.join("\n");
}

export async function eventPage(c, seq) {
  document.title = `Event ${seq} · mewledger`;
  const main = c.main;
  let raw;
  try {
    raw = await get(`/v1/events/${encodeURIComponent(seq)}?` + c.spaceParams().toString());
  } catch (e) {
    if (e instanceof HTTPError && e.status === 404) {
      clear(main);
      main.append(h("h1", {}, `No event at seq ${seq}`), h("p", {}, e.message), h("p", {}, h("a", { href: c.link("/ui/events") }, "← Events")));
      return;
    }
    throw e;
  }
  const ev = raw.event;
  const bytes = b64bytes(raw.data);
  let text = null;
  try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { text = null; }
  clear(main);
  main.append(h("p", { class: "crumbs" }, h("a", { href: c.link("/ui/events") }, "← Events")));
  main.append(h("h1", {}, `Event seq ${raw.seq}`, ev && ev.id ? h("span", { class: "sub" }, " ", h("code", {}, ev.id)) : null, " ", ev ? effectBadge(ev.effect) : null));
  const headers = Object.entries(raw.headers || {}).flatMap(([k, vs]) => vs.map((v) => h("li", {}, h("code", {}, k), ": ", h("code", {}, v))));
  const facts = h("dl", { class: "facts" });
  const add = (k, v) => { if (v != null && v !== "") facts.append(h("dt", {}, k), h("dd", {}, v)); };
  add("Subject", h("code", { id: "ev-subject" }, raw.subject));
  add("Stream time", h("time", { datetime: raw.time }, raw.time));
  add("Nats-Msg-Id", raw.msg_id ? h("code", {}, raw.msg_id) : null);
  add("Headers", headers.length ? h("ul", { class: "plain" }, ...headers) : "none");
  add("Bytes", `${bytes.length}`);
  add("SHA-256 of the bytes", h("code", { id: "ev-sha" }, raw.sha256));
  if (ev) {
    add("Envelope digest", ev.digest ? h("code", {}, ev.digest) : null);
    add("Space", ev.space);
    add("Type / kind", `${ev.type || "?"} · ${ev.kind || "no kind"}`);
    add("From", ev.from ? h("a", { href: c.link("/ui/events", { from: ev.from }) }, ev.from) : null);
    add("Tool", ev.tool ? h("span", {}, h("a", { href: c.link("/ui/events", { tool: ev.tool }) }, ev.tool), ev.arg ? " " + ev.arg : "") : null);
    add("Reason", ev.reason);
  } else {
    add("Record", "The projection has not folded this message yet.");
  }
  main.append(h("section", { "aria-labelledby": "h-msg" }, h("h2", { id: "h-msg" }, "The stored message"), facts));
  if (ev) {
    main.append(h("section", { "aria-labelledby": "h-fold" }, h("h2", { id: "h-fold" }, "What the fold did with it"),
      h("ul", { class: "plain entries" }, ...(ev.entries || []).map((en) => h("li", { "data-key": en.key },
        effectBadge(en.effect), " under ", h("a", { href: c.link("/ui/proposals/" + encodeURIComponent(en.key), { space: ev.space }) }, en.key),
        en.code ? h("span", {}, " — ", h("code", {}, en.code)) : null,
        en.detail ? h("span", { class: "detail" }, " — " + en.detail) : null,
        en.resolved_seq ? h("span", { class: "orphan-note" }, ` (an orphan until seq ${en.resolved_seq})`) : null,
        en.anomalies && en.anomalies.length ? h("span", { class: "anom" }, " ⚠ raised " + en.anomalies.join(", ")) : null)))));
  }
  const blob = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  main.append(h("section", { "aria-labelledby": "h-raw" }, h("h2", { id: "h-raw" }, "Raw envelope, byte for byte"),
    h("p", { class: "detail" }, text !== null ? "The original bytes, as UTF-8 text." : "The bytes are not UTF-8: a hex dump.", " ",
      h("a", { href: blob, download: `event-${raw.seq}.bin`, id: "raw-download" }, "⤓ Download the bytes")),
    h("pre", { class: "raw", id: "raw-bytes", tabindex: "0" }, text !== null ? text : hexdump(bytes))));
  if (text !== null) {
    try {
      const pretty = JSON.stringify(JSON.parse(text), null, 2);
      main.append(h("details", { class: "params" }, h("summary", {}, "Decoded (indented JSON)"), h("pre", {}, pretty)));
    } catch { /* not JSON: the raw view says it all */ }
  }
}

// ---------------------------------------------------------------- status

export async function statusPage(c) {
  document.title = "Status · mewledger";
  const main = c.main;
  const [st, stats] = await Promise.all([get("/v1/status"), get("/v1/stats?" + c.spaceParams().toString()).catch(() => null)]);
  clear(main);
  main.append(h("h1", {}, "Status"));
  const facts = h("dl", { class: "facts", id: "status-facts" });
  const add = (k, v, id) => facts.append(h("dt", {}, k), h("dd", { id }, v));
  add("Stream (last sequence)", String(st.stream_seq), "st-stream");
  add("Projection (applied)", String(st.projected_seq), "st-projected");
  add("Lag", `${st.lag} event${st.lag === 1 ? "" : "s"}`, "st-lag");
  add("Log check", st.log_problem ? h("span", { class: "bad" }, "✖ problem: " + st.log_problem) : h("span", { class: "good" }, "✔ ok: the projection matches the log"), "st-logcheck");
  // The log checks itself (contract §16): damage found in the log, the
  // scrub's progress, and signing stopped at the last good size.
  const d = st.log_damage;
  if (d) {
    main.append(h("div", { class: "damage-banner bad", id: "st-damage", role: "alert", "data-kind": d.kind, "data-seq": String(d.seq) },
      h("strong", {}, `✖ Log damaged: ${d.kind}, seq ${d.seq}. `), d.message,
      " Reads go on, marked as coming from a damaged log; proofs that touch it are refused. See docs/operations.md."));
  }
  const sc = st.scrub;
  if (sc) {
    const pos = sc.position ? `pass at seq ${sc.position} of ${sc.pass_end}` : "no pass running";
    add("Scrub", h("span", { class: d ? "bad" : "good" },
      `${d ? "✖" : "✔"} ${sc.checked} checked, every message through seq ${sc.checked_through}; ${sc.passes} full pass${sc.passes === 1 ? "" : "es"}` +
      (sc.last_pass_ended ? ` (last ended ${sc.last_pass_ended})` : "") + `; ${pos}; ${sc.findings} finding${sc.findings === 1 ? "" : "s"}`), "st-scrub");
  }
  if (st.signing_stopped) {
    add("Signing", h("span", { class: "bad" }, `✖ stopped at size ${st.signing_stopped.size}: ${st.signing_stopped.reason}`), "st-signing");
  }
  main.append(h("section", { "aria-labelledby": "h-pos" }, h("h2", { id: "h-pos" }, "Positions"), facts));
  const cs = st.consumers || [];
  main.append(h("section", { "aria-labelledby": "h-cons" }, h("h2", { id: "h-cons" }, "Consumers of the stream"),
    cs.length ? h("div", { class: "table-wrap" }, h("table", { class: "list consumers" },
      h("thead", {}, h("tr", {}, ...["Name", "Kind", "Delivered", "Ack floor", "Pending", "Awaiting ack", "Redelivered"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, ...cs.map((x) => h("tr", { "data-name": x.name },
        h("td", { "data-label": "Name" }, h("code", {}, x.name)), h("td", { "data-label": "Kind" }, x.durable ? "durable" : "ephemeral"),
        h("td", { "data-label": "Delivered" }, String(x.delivered)), h("td", { "data-label": "Ack floor" }, String(x.ack_floor)),
        h("td", { "data-label": "Pending" }, String(x.pending)), h("td", { "data-label": "Awaiting ack" }, String(x.ack_pending)),
        h("td", { "data-label": "Redelivered" }, String(x.redelivered)))))))
      : h("p", { class: "none" }, "This ledger does not list its consumers.")));
  main.append(witnessStatus(st));
  main.append(h("section", { "aria-labelledby": "h-gaps2" }, h("h2", { id: "h-gaps2" }, "Recording gaps"),
    h("p", { id: "st-gaps" }, stats ? h("a", { href: c.link("/ui/gaps") }, `${stats.gaps || 0} gap${stats.gaps === 1 ? "" : "s"}`) : "—",
      " where a recorder's record of a live space may be incomplete", c.space ? ` (space ${c.space})` : "",
      stats && stats.gaps ? `: ${stats.covered_gaps || 0} covered by another recorder` : "",
      stats && stats.holes ? h("span", { class: "bad" }, `; ${stats.holes} hole${stats.holes === 1 ? "" : "s"}, where no recorder was recording`) : "", ".")));
  // Integrity: the verifiable log's signed checkpoint (contract §16), when
  // this ledger serves one.
  const integ = h("section", { "aria-labelledby": "h-integ", id: "integrity" }, h("h2", { id: "h-integ" }, "Integrity"));
  main.append(integ);
  try {
    let cp, witnessed = true;
    try {
      cp = await getText("/v1/checkpoint");
    } catch (e) {
      // With witnesses, 503 until a checkpoint holds their quorum: the
      // latest signed one is shown, said so.
      if (!(e instanceof HTTPError && e.status === 503 && st.witnessing)) throw e;
      witnessed = false;
      cp = await getText("/v1/checkpoint?unwitnessed=1");
      integ.append(h("p", { class: "bad", id: "not-witnessed" }, "✖ No checkpoint holds the witnesses' quorum yet (" + e.message + "): the latest signed one, not witnessed, is shown."));
    }
    integ.append(h("p", {}, witnessed && st.witnessing ? "The latest witnessed checkpoint of the log (a C2SP tlog-checkpoint note with the witnesses' cosignatures):"
      : "The latest signed checkpoint of the log (a C2SP tlog-checkpoint note):"), h("pre", { class: "raw", id: "checkpoint" }, cp));
    await integrityPanel(integ, cp);
    await cosignersPanel(integ, cp, st);
  } catch (e) {
    if (e instanceof HTTPError && (e.status === 404 || e.status === 405)) {
      integ.append(h("p", { class: "none", id: "no-checkpoint" }, "Not available: this ledger serves no signed checkpoint (the verifiable log, contract §16)."));
    } else {
      integ.append(h("p", { class: "bad" }, "The checkpoint could not be read: " + e.message));
    }
  }
}
