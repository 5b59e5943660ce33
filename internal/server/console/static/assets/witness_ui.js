// Witnesses in the console (docs/console.md, "Witnesses"): the status
// page's per-witness state (GET /v1/status "witnessing"), and, in the
// integrity panel and each proposal's evidence, which witnesses cosigned
// the checkpoint checked, each cosignature verified in this browser
// (verify.js checkCosignatures, WebCrypto Ed25519).
//
// The witness keys trusted are the ones the auditor pinned (kept in
// localStorage, with a quorum), or else the ones this ledger lists in its
// status — said so, since a ledger listing its own witnesses proves
// nothing against itself.
import { h, fmtTime } from "./ui.js";
import { checkCosignatures, parseWitnessKey } from "./verify.js";

const PIN_WITNESSES = "mewledger.witnessKeys";

// pinnedWitnesses is {keys, quorum} the auditor pinned, or null.
export function pinnedWitnesses() {
  try {
    const v = JSON.parse(localStorage.getItem(PIN_WITNESSES) || "null");
    return v && Array.isArray(v.keys) && v.keys.length ? { keys: v.keys.map(String), quorum: Number(v.quorum) || 0 } : null;
  } catch { return null; }
}

function pinWitnesses(v) {
  try { if (v) localStorage.setItem(PIN_WITNESSES, JSON.stringify(v)); else localStorage.removeItem(PIN_WITNESSES); } catch { /* private mode */ }
}

// trusted returns the witness keys to check against: {keys, quorum
// (resolved: 0 means all), source: "pinned" | "served" | "none"}.
export function trusted(st) {
  const p = pinnedWitnesses();
  if (p) return { keys: p.keys, quorum: p.quorum > 0 ? p.quorum : p.keys.length, source: "pinned" };
  const w = st && st.witnessing;
  if (w && w.witnesses && w.witnesses.length) {
    const keys = w.witnesses.map((x) => x.vkey);
    return { keys, quorum: w.quorum > 0 ? w.quorum : keys.length, source: "served" };
  }
  return { keys: [], quorum: 0, source: "none" };
}

// cosigners checks the note against the trusted witnesses: {results,
// verified (count), quorum, met, source}.
export async function cosigners(noteText, st) {
  const tr = trusted(st);
  const results = tr.keys.length ? await checkCosignatures(noteText, tr.keys) : [];
  const verified = results.filter((r) => r.verified).length;
  return { results, verified, quorum: tr.quorum, met: tr.keys.length > 0 && verified >= tr.quorum, source: tr.source };
}

function mark(el, state) {
  el.dataset.verdict = state;
  el.className = state === "verified" ? "good" : state === "failed" ? "bad" : "none";
}

function quorumText(c) {
  return `${c.verified} of the ${c.results.length} witness${c.results.length === 1 ? "" : "es"} ` +
    `${c.source === "pinned" ? "you pinned" : "this ledger lists"} cosigned it (verified in this browser); quorum ${c.quorum}: ` +
    (c.met ? "met" : "not met");
}

// cosignersTable lists each witness: name, verified yes / no (and why),
// when it cosigned.
function cosignersTable(c) {
  return h("div", { class: "table-wrap" }, h("table", { class: "list cosigners", id: "cosigners" },
    h("thead", {}, h("tr", {}, ...["Witness", "Cosignature", "Cosigned at (its clock)"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, ...c.results.map((r) => h("tr", { "data-witness": r.name, "data-verified": r.verified ? "yes" : "no" },
      h("td", { "data-label": "Witness" }, h("code", { title: r.key }, r.name)),
      h("td", { "data-label": "Cosignature", class: r.verified ? "good" : "bad" }, r.verified ? "✔ verified" : `✖ not verified: ${r.why}`),
      h("td", { "data-label": "Cosigned at" }, r.time ? h("time", { datetime: r.time.toISOString() }, fmtTime(r.time.toISOString())) : "—"))))));
}

// cosignersPanel appends to the integrity panel (sec) which witnesses
// cosigned the checkpoint cp (its signed note), and the form to pin the
// witness keys the auditor trusts.
export async function cosignersPanel(sec, cp, st) {
  const box = h("div", { id: "witness-panel" }, h("h3", { id: "h-cosign" }, "Witnesses' cosignatures"));
  sec.append(box);
  const verdictEl = h("p", { id: "witness-verdict", role: "status" });
  const holder = h("div", {});
  box.append(verdictEl, holder);
  const render = async () => {
    holder.replaceChildren();
    let c;
    try { c = await cosigners(cp, st); } catch (e) {
      mark(verdictEl, "failed");
      verdictEl.textContent = "✖ The cosignatures could not be checked: " + e.message;
      return;
    }
    verdictEl.dataset.source = c.source;
    verdictEl.dataset.verified = String(c.verified);
    verdictEl.dataset.quorum = String(c.quorum);
    if (c.source === "none") {
      mark(verdictEl, "unavailable");
      verdictEl.textContent = "No witnesses: this ledger asks none and you pinned none. The checkpoint is signed by the ledger's key only, so a split view (one history shown to one auditor, another to the next) would go unseen.";
      return;
    }
    mark(verdictEl, c.met ? "verified" : "failed");
    verdictEl.textContent = (c.met ? "✔ " : "✖ ") + "This checkpoint: " + quorumText(c) + "." +
      (c.source === "served" ? " These are the keys this ledger lists, which prove nothing against the ledger itself: pin the ones its operator published." : "");
    holder.append(cosignersTable(c));
  };
  // The pin form: witness keys one a line, and a quorum.
  const p = pinnedWitnesses();
  const keys = h("textarea", { id: "pin-witnesses", rows: "3", cols: "70", placeholder: "<name>+<hash>+<base64>, one a line", "aria-label": "Witness keys to pin, one a line" });
  keys.value = p ? p.keys.join("\n") : "";
  const quorum = h("input", { id: "pin-quorum", type: "number", min: "0", size: "3", "aria-label": "Quorum (0: all)", value: p ? String(p.quorum) : "0" });
  const msg = h("p", { id: "pin-witnesses-verdict", role: "status" });
  const form = h("form", { id: "pin-witnesses-form", class: "pin" }, keys, " ", h("label", {}, "quorum ", quorum), " ",
    h("button", { type: "submit", id: "pin-witnesses-btn" }, "Pin these witnesses"), " ",
    h("button", { type: "button", id: "unpin-witnesses-btn" }, "Forget"));
  box.append(h("p", {}, "The witness keys this browser trusts (kept in localStorage; with none pinned, the keys this ledger lists are used):"), form, msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const list = keys.value.split("\n").map((s) => s.trim()).filter(Boolean);
    const q = Number(quorum.value) || 0;
    try {
      for (const k of list) await parseWitnessKey(k);
      if (!list.length) throw new Error("no key given");
      if (q < 0 || q > list.length) throw new Error(`a quorum of ${q} with ${list.length} key${list.length === 1 ? "" : "s"}`);
    } catch (e) { mark(msg, "failed"); msg.textContent = "✖ Not pinned: " + e.message; return; }
    pinWitnesses({ keys: list, quorum: q });
    mark(msg, "verified"); msg.textContent = `✔ Pinned ${list.length} witness key${list.length === 1 ? "" : "s"}.`;
    await render();
  });
  box.querySelector("#unpin-witnesses-btn").addEventListener("click", async () => {
    pinWitnesses(null); keys.value = ""; quorum.value = "0";
    mark(msg, "unavailable"); msg.textContent = "Forgotten: the keys this ledger lists are used.";
    await render();
  });
  await render();
}

// cosignersLine is the evidence section's line: which witnesses cosigned
// the bundle's checkpoint (note), verified in this browser.
export async function cosignersLine(el, note, st) {
  const c = await cosigners(note, st);
  if (c.source === "none") { el.hidden = true; return; }
  mark(el, c.met ? "verified" : "failed");
  el.dataset.verified = String(c.verified);
  el.textContent = (c.met ? "✔ Witnessed: " : "✖ Not witnessed by the quorum: ") + quorumText(c) + " — " +
    c.results.map((r) => `${r.name} ${r.verified ? "✔" : "✖"}`).join(", ") + ".";
}

// witnessStatus is the status page's section: the quorum, the witnessed
// and the latest signed size, and each witness's state (last cosigned
// size, last error, an alarm).
export function witnessStatus(st) {
  const w = st.witnessing;
  const sec = h("section", { "aria-labelledby": "h-wit", id: "witnesses-status" }, h("h2", { id: "h-wit" }, "Witnesses"));
  if (!w || !w.witnesses || !w.witnesses.length) {
    sec.append(h("p", { class: "none", id: "no-witnesses" }, "This ledger asks no witnesses to cosign its checkpoints (ledger serve --witness)."));
    return sec;
  }
  const size = (n) => (n == null || n < 0 ? "none yet" : `${n}`);
  const behind = w.witnessed_size < w.signed_size;
  sec.append(h("p", { id: "wit-summary", class: w.witnesses.some((x) => x.alarm) ? "bad" : behind ? "none" : "good" },
    `Quorum ${w.quorum} of ${w.witnesses.length}. Witnessed checkpoint: size ${size(w.witnessed_size)}; latest signed: size ${size(w.signed_size)}` +
    (behind ? " — the witnessed checkpoint is behind (a witness is slow or down; signing goes on)." : ".")));
  sec.append(h("div", { class: "table-wrap" }, h("table", { class: "list witnesses" },
    h("thead", {}, h("tr", {}, ...["Witness", "URL", "Last cosigned size", "Last error", "Alarm"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, ...w.witnesses.map((x) => h("tr", { "data-witness": x.name, class: x.alarm ? "bad" : null },
      h("td", { "data-label": "Witness" }, h("code", { title: x.vkey }, x.name)),
      h("td", { "data-label": "URL" }, h("code", {}, x.url)),
      h("td", { "data-label": "Last cosigned size", class: "w-size" }, size(x.cosigned_size), x.cosigned_at ? h("span", { class: "detail" }, ` at ${fmtTime(x.cosigned_at)}`) : null),
      h("td", { "data-label": "Last error", class: "w-error" + (x.last_error ? " bad" : "") }, x.last_error
        ? `${x.last_error}${x.failures ? ` (${x.failures} failure${x.failures === 1 ? "" : "s"} in a row)` : ""}${x.last_error_at ? ` at ${fmtTime(x.last_error_at)}` : ""}`
        : "none"),
      h("td", { "data-label": "Alarm", class: "w-alarm" + (x.alarm ? " bad" : "") }, x.alarm ? "✖ " + x.alarm : "—")))))));
  return sec;
}
