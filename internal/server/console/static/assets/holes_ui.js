// Holes in the console (contract §14 "Several recorders", docs/console.md
// "Recording gaps and holes"): the gap page's list of holes — windows of
// a MEW space in which no recorder was recording (GET /v1/holes) — and,
// on a proposal's page, whether its lifecycle crosses one.
import { get } from "./api.js";
import { h, fmtTime } from "./ui.js";

// edge renders an envelope stored on one side of a hole: its sequence
// (a link to the stored message), id and the stream's time.
function edge(e, link) {
  if (!e) return null;
  return h("span", { class: "hole-edge" }, h("a", { href: link("/ui/events/" + e.seq), class: "seqlink" }, `seq ${e.seq}`),
    e.id ? h("span", {}, " ", h("code", {}, e.id)) : null, e.at ? h("span", { class: "detail" }, ` at ${fmtTime(e.at)}`) : null);
}

// windowText is a hole's window in words and links.
export function holeWindow(hole, link) {
  const after = hole.after ? edge(hole.after, link) : "the start of the log";
  if (hole.open || !hole.before) return h("span", { class: "hole-window" }, "after ", after, " — still open: no recorder has come back");
  return h("span", { class: "hole-window" }, "after ", after, " and before ", edge(hole.before, link));
}

// holesSection is the gap page's section: the holes of the space (ctx:
// link, apiParams), each with its window, the envelopes stored on either
// side, the recorders in gap and their gaps.
export async function holesSection(ctx, inHole) {
  const sec = h("section", { "aria-labelledby": "h-holes", id: "holes" }, h("h2", { id: "h-holes" }, "Holes"),
    h("p", { class: "detail" }, "A hole is a window in which no recorder of the MEW space was recording: whatever the space carried then is not in the ledger. " +
      "A gap another recorder recorded through is covered, not a hole."));
  let body;
  try {
    body = await get("/v1/holes?" + ctx.apiParams().toString());
  } catch (e) {
    sec.append(h("p", { class: "none", id: "no-holes" }, "Holes are not available: " + e.message));
    return sec;
  }
  const holes = body.holes || [];
  if (inHole) for (const x of holes) for (const g of x.gaps || []) inHole.add(g);
  sec.dataset.count = String(holes.length);
  if (!holes.length) {
    sec.append(h("p", { class: "good", id: "no-holes" }, (body.recorders || []).length
      ? `✔ No holes: at every moment at least one of the ${(body.recorders || []).length} recorders was recording.`
      : "No holes: no recorder records into this space."));
    return sec;
  }
  sec.append(h("p", { class: "bad", id: "holes-summary" }, `✖ ${holes.length} hole${holes.length === 1 ? "" : "s"}: windows no recorder recorded.`));
  sec.append(h("div", { class: "table-wrap" }, h("table", { class: "list holes" },
    h("thead", {}, h("tr", {}, ...["MEW space", "Stored before the hole", "Stored after the hole", "Recorders in gap", "Their gaps"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, ...holes.map((x, i) => h("tr", { "data-hole": String(i), "data-after": x.after ? String(x.after.seq) : "", "data-before": x.before ? String(x.before.seq) : "", class: x.open ? "open" : null },
      h("td", { "data-label": "MEW space" }, h("code", {}, x.mew_space)),
      h("td", { "data-label": "Stored before the hole", class: "h-after" }, x.after ? edge(x.after, ctx.link) : "the start of the log"),
      h("td", { "data-label": "Stored after the hole", class: "h-before" }, x.open || !x.before ? h("strong", { class: "bad" }, "still open: no recorder has come back") : edge(x.before, ctx.link)),
      h("td", { "data-label": "Recorders in gap", class: "h-recorders" }, (x.recorders || []).join(", ") || "—"),
      h("td", { "data-label": "Their gaps", class: "h-gaps" }, (x.gaps || []).length ? h("ul", { class: "plain" }, ...x.gaps.map((g) => h("li", {}, h("code", {}, g)))) : "—")))))));
  return sec;
}

// coveredCell is a gap's covered / not covered cell (inHole: the ids of
// the gaps in a hole).
export function coveredCell(g, inHole) {
  if (g.covered) return h("span", { class: "good", "data-covered": "yes" }, "✔ covered by " + (g.covered_by || []).join(", "));
  return h("span", { class: "bad", "data-covered": "no" }, "✖ not covered", inHole && inHole.has(g.id) ? h("span", { class: "in-hole" }, " (part of a hole)") : "");
}

// Crossing: a proposal's lifecycle runs from its first event's sequence to
// its last one's; while it is pending, to the log's end (its decision may
// yet come, or have been lost). It crosses a hole when the hole's window
// — strictly between the envelope stored before it and the one stored
// after it (the log's end while open) — overlaps that span: an envelope
// of the proposal may have been carried in the window and lost.
export function crossings(p, events, holes) {
  const seqs = events.map((e) => e.seq).filter((s) => s > 0);
  if (p.created_seq) seqs.push(p.created_seq);
  if (!seqs.length) return { first: 0, last: 0, open: false, holes: [] };
  const first = Math.min(...seqs);
  const open = p.state === "pending";
  const last = open ? Infinity : Math.max(...seqs);
  const crossing = holes.filter((x) => {
    const a = x.after ? x.after.seq : 0;
    const b = x.open || !x.before ? Infinity : x.before.seq;
    return a < last && b > first;
  });
  return { first, last: open ? Math.max(...seqs) : last, open, holes: crossing };
}

// holeCrossing returns the proposal page's hole section (hidden until the
// holes are read; shown only when the lifecycle crosses one). ctx: link,
// query (the /v1/holes query: the proposal's space, the as-of point),
// past.
export function holeCrossing(p, events, ctx) {
  const sec = h("section", { id: "hole-crossing", class: "hole-crossing", role: "note", "aria-labelledby": "h-hole", hidden: true });
  (async () => {
    let body;
    try {
      body = await get("/v1/holes?" + ctx.query.toString());
    } catch { sec.dataset.checked = "unavailable"; return; }
    const c = crossings(p, events, body.holes || []);
    sec.dataset.checked = "yes";
    sec.dataset.crosses = String(c.holes.length);
    if (!c.holes.length) return;
    const span = `from seq ${c.first} to ` + (c.open ? `${ctx.past ? "the point shown" : "now"} (it is pending; its last event is seq ${c.last})` : `seq ${c.last}`);
    sec.append(h("h2", { id: "h-hole" }, "⚠ Its lifecycle crosses a recording hole"),
      h("p", {}, `This proposal's lifecycle runs ${span}, and no recorder was recording in ` +
        (c.holes.length === 1 ? "this window" : `these ${c.holes.length} windows`) + ": an envelope of it carried then (a fulfilment, a response, a rejection, a withdrawal…) may be missing from the ledger."),
      h("ul", { class: "plain" }, ...c.holes.map((x) => h("li", { "data-after": x.after ? String(x.after.seq) : "" },
        "MEW space ", h("code", {}, x.mew_space), ": ", holeWindow(x, ctx.link),
        (x.recorders || []).length ? ` (recorders in gap: ${x.recorders.join(", ")})` : ""))),
      h("p", {}, h("a", { href: ctx.link("/ui/gaps") }, "Recording gaps and holes")));
    sec.hidden = false;
  })().catch(() => { sec.dataset.checked = "unavailable"; });
  return sec;
}
