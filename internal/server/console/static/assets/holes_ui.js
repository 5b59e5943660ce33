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

// holesSection returns the gap page's section (ctx: link, apiParams): the
// holes of the space, each with its window, the envelopes stored on either
// side, the recorders in gap and their gaps; and the holes read.
export async function holesSection(ctx) {
  const sec = h("section", { "aria-labelledby": "h-holes", id: "holes" }, h("h2", { id: "h-holes" }, "Holes"),
    h("p", { class: "detail" }, "A hole is a window in which no recorder of the MEW space was recording: whatever the space carried then is not in the ledger. " +
      "A gap another recorder recorded through is covered, not a hole."));
  let body;
  try {
    body = await get("/v1/holes?" + ctx.apiParams().toString());
  } catch (e) {
    sec.append(h("p", { class: "none", id: "no-holes" }, "Holes are not available: " + e.message));
    return { section: sec, holes: [] };
  }
  const holes = body.holes || [];
  sec.dataset.count = String(holes.length);
  if (!holes.length) {
    sec.append(h("p", { class: "good", id: "no-holes" }, (body.recorders || []).length
      ? `✔ No holes: at every moment at least one of the ${(body.recorders || []).length} recorders was recording.`
      : "No holes: no recorder records into this space."));
    return { section: sec, holes };
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
  return { section: sec, holes };
}

// span is a part of a hole in a hole change, in words (seq..seq, open).
function span(x) {
  return `${x.after ? "seq " + x.after.seq : "the log's start"}..${x.open || !x.before ? "open" : "seq " + x.before.seq}`;
}

// holeChangeText says what one `event: holes` of /v1/watch changed.
export function holeChangeText(c) {
  const part = (xs, verb) => (xs || []).length ? `${verb} ${(xs || []).map(span).join(", ")}` : "";
  const what = [part(c.opened, "opened"), part(c.healed, "healed")].filter(Boolean).join("; ");
  const now = (c.holes || []).length;
  return `Updated live at seq ${c.seq}: the holes of MEW space ${c.mew_space} changed (${what || "no window"}); ${now} hole${now === 1 ? "" : "s"} now.`;
}

// coveredCell is a gap's covered / not covered cell (inHole: the ids of
// the gaps in a hole).
export function coveredCell(g, inHole) {
  if (g.covered) return h("span", { class: "good", "data-covered": "yes" }, "✔ covered by " + (g.covered_by || []).join(", "));
  return h("span", { class: "bad", "data-covered": "no" }, "✖ not covered", inHole && inHole.has(g.id) ? h("span", { class: "in-hole" }, " (part of a hole)") : "");
}

// holeCrossing returns the proposal page's note saying that its lifecycle
// crosses recording holes, from the proposal's hole_crossing (GET
// /v1/proposals/{id} works it out: docs/bridge.md "A proposal crossing a
// hole"); hidden when it crosses none. ctx: link, past.
export function holeCrossing(p, ctx) {
  const sec = h("section", { id: "hole-crossing", class: "hole-crossing", role: "note", "aria-labelledby": "h-hole", hidden: true });
  const c = p.hole_crossing;
  sec.dataset.checked = "yes";
  sec.dataset.crosses = String(c && c.holes ? c.holes.length : 0);
  if (!c || !c.holes || !c.holes.length) return sec;
  const span = `from seq ${c.first_seq} to ` + (c.open ? `${ctx.past ? "the point shown" : "now"} (it is pending; its last event is seq ${c.last_seq})` : `seq ${c.last_seq}`);
  sec.append(h("h2", { id: "h-hole" }, "⚠ Its lifecycle crosses a recording hole"),
    h("p", {}, `This proposal's lifecycle runs ${span}, and no recorder was recording in ` +
      (c.holes.length === 1 ? "this window" : `these ${c.holes.length} windows`) + ": an envelope of it carried then (a fulfilment, a response, a rejection, a withdrawal…) may be missing from the ledger."),
    h("ul", { class: "plain" }, ...c.holes.map((x) => h("li", { "data-after": x.after ? String(x.after.seq) : "" },
      "MEW space ", h("code", {}, x.mew_space), ": ", holeWindow(x, ctx.link),
      (x.recorders || []).length ? ` (recorders in gap: ${x.recorders.join(", ")})` : ""))),
    h("p", {}, h("a", { href: ctx.link("/ui/gaps") }, "Recording gaps and holes")));
  sec.hidden = false;
  return sec;
}

// crossingMark is the proposal list's mark of a proposal whose lifecycle
// crosses a recording hole (nothing otherwise).
export function crossingMark(p) {
  const c = p.hole_crossing;
  if (!c || !c.holes || !c.holes.length) return null;
  return h("span", { class: "bad hole-mark", "data-crosses": String(c.holes.length), title: "An envelope of it carried while no recorder was recording may be missing" },
    ` ⚠ crosses ${c.holes.length === 1 ? "a recording hole" : c.holes.length + " recording holes"}`);
}
