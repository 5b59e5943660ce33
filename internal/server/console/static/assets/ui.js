// Small DOM helpers: elements are built with h() (text is always set as
// text, never parsed as HTML), and the vocabulary of states, effects and
// anomalies in words.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "hidden") el.hidden = !!v;
    else if (k === "selected") el.selected = !!v;
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export const STATES = ["pending", "fulfilled", "withdrawn", "rejected", "expired"];

// Each state has an icon and a word, so that colour is never the only cue.
const STATE_ICON = { pending: "◷", fulfilled: "✔", withdrawn: "↶", rejected: "✖", expired: "⊘" };

export function stateBadge(state, iconOnly, size) {
  const icon = STATE_ICON[state] || "?";
  return h("span", { class: `badge st-${state}${size ? " " + size : ""}`, "data-state": state, title: iconOnly ? state : null },
    h("span", { "aria-hidden": "true" }, icon), iconOnly ? h("span", { class: "visually-hidden" }, state) : " " + state);
}

const EFFECT_WORD = {
  applied: "applied", recorded: "recorded", duplicate: "duplicate", late: "late", unauthorized: "unauthorized",
  invalid: "invalid", orphan: "orphan (waiting)", ignored: "ignored",
};
export function effectBadge(effect) {
  return h("span", { class: "effect eff-" + effect, title: "effect" }, EFFECT_WORD[effect] || effect || "?");
}

export const ANOMALIES = {
  id_conflict: "The same proposal id was used again with different content; the later envelope was refused as invalid.",
  unauthorized_withdraw: "Someone other than the proposer tried to withdraw it; the withdrawal was refused.",
  multiple_fulfillments: "It was fulfilled more than once: the first fulfilment counts, but the later ones ran too.",
  fulfilled_after_withdrawn: "It was fulfilled after its proposer had withdrawn it: the operation ran anyway.",
  fulfilled_after_rejected: "It was fulfilled after it had been rejected: the operation ran anyway.",
  fulfilled_after_expired: "It was fulfilled after its deadline had passed.",
  fulfillment_mismatch: "A fulfilment's method or parameters differ from what was proposed.",
  target_mismatch: "A fulfilment was addressed to other participants than the proposal's to.",
  self_fulfilled: "The proposer fulfilled its own proposal.",
  unapproved_fulfillment: "It was fulfilled before it had the approvals its approval class needs.",
  fulfilled_before_window: "It was fulfilled before its time window opened.",
  id_reused: "An event id was reused by a different event (a participant's counter restarted?): both were folded on their own merits.",
  msg_id_clash: "Other bytes were stored under this envelope's message id; the ledger kept both.",
  exclusive_violation: "Someone outside the proposal's exclusive targets fulfilled it while the exclusive window was open.",
};
const EXTRA_ANOMALIES = {};
export function anomalyText(a) {
  return ANOMALIES[a] || EXTRA_ANOMALIES[a] || `Anomaly ${a.replaceAll("_", " ")}.`;
}

// targetText shows a target: a name, or {id, sources} with the fields
// that name it when not only "to".
export function targetText(t) {
  if (typeof t === "string") return t;
  if (!t || !t.id) return String(t);
  const src = (t.sources || []).filter((x) => x !== "to");
  return src.length ? `${t.id} (${src.join(", ")})` : t.id;
}

export function fmtTime(s) {
  if (!s) return "—";
  const d = new Date(s);
  if (isNaN(d)) return s;
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/:00Z$/, ":00Z");
}

export function relTime(s) {
  const d = new Date(s);
  if (isNaN(d)) return s || "—";
  const sec = Math.round((Date.now() - d.getTime()) / 1000);
  if (sec < 0 || sec > 7 * 86400) return fmtTime(s);
  if (sec < 60) return `${sec}s ago`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)}h ago`;
  return `${Math.floor(sec / 86400)}d ago`;
}

// announce says something to screen readers (a polite live region).
export function announce(msg) {
  const el = document.getElementById("announce");
  if (el) el.textContent = msg;
}
