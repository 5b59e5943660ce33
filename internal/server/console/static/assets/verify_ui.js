// The console's integrity views (docs/console.md, "Integrity"): the
// status page's panel (latest checkpoint, tree size, the verifier key this
// ledger serves, the key the auditor pins) and each proposal page's
// evidence section, whose verdict is computed in this browser (verify.js).
import { get, getText, HTTPError } from "./api.js";
import { h } from "./ui.js";
import { pinnedKey, pinKey, verifyBundle, parseVerifierKey, openCheckpoint, VerifyError } from "./verify.js";
import { cosignersLine } from "./witness_ui.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// servedKey is this ledger's verifier key ("" when it serves none).
async function servedKey() {
  try { return (await getText("/v1/checkpoint/key")).trim(); } catch (e) {
    if (e instanceof HTTPError && (e.status === 404 || e.status === 405)) return "";
    throw e;
  }
}

function verdict(el, state, text) {
  el.dataset.verdict = state;
  el.className = state === "verified" ? "good" : state === "failed" ? "bad" : "none";
  el.textContent = (state === "verified" ? "✔ " : state === "failed" ? "✖ " : "") + text;
}

// evidenceSection returns the proposal page's evidence section and starts
// checking the proposal's proof against the pinned key (or, with none
// pinned, the served one, said so).
export function evidenceSection(id, events, ctx) {
  const out = h("p", { id: "proof-verdict", role: "status", "aria-live": "polite" });
  const detail = h("p", { class: "detail", id: "proof-detail" });
  const wit = h("p", { id: "proof-witnesses", role: "status", hidden: true });
  const sec = h("section", { "aria-labelledby": "h-evidence", id: "evidence" }, h("h2", { id: "h-evidence" }, "Evidence"), out, wit, detail);
  if (ctx.past) {
    verdict(out, "unavailable", "Not checked in the past view: proofs are against the latest checkpoint.");
    return sec;
  }
  verdict(out, "checking", "Checking the inclusion proof in this browser…");
  (async () => {
    let bundle = null;
    for (let attempt = 0; ; attempt++) {
      try {
        bundle = await get(`/v1/proposals/${encodeURIComponent(id)}/proof?` + ctx.query);
        break;
      } catch (e) {
        if (e instanceof HTTPError && e.status === 503 && attempt < 10) { await sleep(500); continue; }
        if (e instanceof HTTPError && (e.status === 404 || e.status === 405)) {
          verdict(out, "unavailable", "Not available: this ledger serves no proofs for it.");
        } else {
          verdict(out, "unavailable", "The proof could not be read: " + e.message);
        }
        return;
      }
    }
    let key = pinnedKey(), source = "pinned";
    if (!key) { key = await servedKey(); source = "served"; }
    out.dataset.keySource = source;
    if (!key) { verdict(out, "unavailable", "No verifier key: pin one on the status page."); return; }
    try {
      const v = await verifyBundle(bundle, key, events);
      verdict(out, "verified", `Verified in this browser: ${v.events} event${v.events === 1 ? "" : "s"} of the history ` +
        `are in the log the checkpoint ${v.checkpoint.origin} @ ${v.checkpoint.size} signs` +
        (source === "pinned" ? " (the key you pinned)." : " — against the key this ledger serves, which proves nothing against the ledger itself: pin the key its operator published."));
      // Which witnesses cosigned that checkpoint, verified here too.
      try {
        const st = await get("/v1/status");
        wit.hidden = false;
        await cosignersLine(wit, bundle.checkpoint, st);
      } catch (e) {
        wit.hidden = false;
        wit.textContent = "The witnesses' cosignatures could not be checked: " + e.message;
      }
      detail.replaceChildren("SHA-256 (RFC 6962) leaf and inclusion hashes and the Ed25519 signature of the checkpoint, with WebCrypto. " +
        "What is proven: these events' bytes at their positions in the signed log. The state above is the ledger's fold of them, not re-derived here. ",
      h("a", { href: ctx.statusLink + "#integrity" }, "Integrity and the pinned key"));
    } catch (e) {
      const kind = e instanceof VerifyError ? e.kind : "error";
      out.dataset.kind = kind;
      verdict(out, "failed", `Verification failed (${kind}): ${e.message}`);
    }
  })().catch((e) => verdict(out, "failed", "Verification failed: " + e.message));
  return sec;
}

// integrityPanel fills the status page's integrity section: the latest
// checkpoint (cp, its signed note), its tree size, the served verifier
// key, the pinned one (a form to pin or forget it), and whether the
// checkpoint's signature verifies with the pinned key.
export async function integrityPanel(sec, cp) {
  const lines = cp.split("\n");
  const facts = h("dl", { class: "facts" },
    h("dt", {}, "Log (origin)"), h("dd", { id: "cp-origin" }, h("code", {}, lines[0] || "")),
    h("dt", {}, "Tree size"), h("dd", { id: "cp-size" }, `${lines[1] || "?"} leaves`),
    h("dt", {}, "Root hash"), h("dd", {}, h("code", { id: "cp-root" }, lines[2] || "")));
  sec.append(facts);
  const served = await servedKey();
  sec.append(h("p", {}, "Verifier key ", h("strong", {}, "served by this ledger"), " — compare it out of band with the key its operator published: ",
    h("code", { id: "served-key" }, served || "none")));
  const pinned = pinnedKey();
  const input = h("input", { id: "pin-key", type: "text", size: "60", placeholder: "<origin>+<hash>+<base64>", "aria-label": "Verifier key to pin", value: pinned });
  const msg = h("p", { id: "pin-verdict", role: "status" });
  const form = h("form", { id: "pin-form", class: "pin" }, input, " ", h("button", { type: "submit", id: "pin-btn" }, "Pin this key"),
    " ", h("button", { type: "button", id: "unpin-btn" }, "Forget"));
  sec.append(h("p", {}, "The key this browser trusts (kept in this browser's localStorage; proposal pages check their proofs against it):"), form, msg);
  const check = async () => {
    const k = pinnedKey();
    if (!k) { verdict(msg, "unavailable", "No key pinned: proposal pages check against the served key, which proves nothing against this ledger."); return; }
    try {
      const v = await openCheckpoint(cp, await parseVerifierKey(k));
      verdict(msg, "verified", `The latest checkpoint (${v.origin} @ ${v.size}) carries a valid signature of the pinned key` + (k === served ? "." : ", which is not the key this ledger serves."));
    } catch (e) {
      verdict(msg, "failed", `The latest checkpoint does not verify with the pinned key (${e.kind || "error"}): ${e.message}`);
    }
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const k = input.value.trim();
    try { await parseVerifierKey(k); } catch (e) { verdict(msg, "failed", "Not pinned: " + e.message); return; }
    pinKey(k);
    await check();
  });
  sec.querySelector("#unpin-btn").addEventListener("click", async () => { pinKey(""); input.value = ""; await check(); });
  await check();
}
