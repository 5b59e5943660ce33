// Evidence checked in the browser (contract §16, docs/proofs.md): a
// proposal's evidence bundle (GET /v1/proposals/{id}/proof) verified with
// WebCrypto — SHA-256 for the RFC 6962 leaf and node hashes, Ed25519 for
// the checkpoint's signed note (C2SP signed-note, tlog-checkpoint) — against
// a verifier key. The key the browser trusts is the one the auditor pinned
// (kept in localStorage), got out of band; the one this ledger serves is
// only shown, to be compared, since a server cannot vouch for itself.

const PIN_KEY = "mewledger.verifierKey";

export function pinnedKey() {
  try { return localStorage.getItem(PIN_KEY) || ""; } catch { return ""; }
}

export function pinKey(k) {
  try { if (k) localStorage.setItem(PIN_KEY, k); else localStorage.removeItem(PIN_KEY); } catch { /* private mode */ }
}

const enc = new TextEncoder();

export function b64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toB64(u8) {
  let s = "";
  for (const x of u8) s += String.fromCharCode(x);
  return btoa(s);
}

function concat(...parts) {
  const n = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function sha256(u8) { return new Uint8Array(await crypto.subtle.digest("SHA-256", u8)); }

// leafHash and nodeHash are RFC 6962's (tlog.RecordHash, tlog.NodeHash).
export function leafHash(leaf) { return sha256(concat(new Uint8Array([0]), leaf)); }
function nodeHash(l, r) { return sha256(concat(new Uint8Array([1]), l, r)); }

export class VerifyError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}

// parseVerifierKey parses a note verifier key "<name>+<hash>+<base64>"
// (Ed25519: the key's first byte is 1) and checks its key hash.
export async function parseVerifierKey(text) {
  // The base64 key may itself hold "+": split at the first two only.
  const t = text.trim(), i = t.indexOf("+"), j = t.indexOf("+", i + 1);
  const parts = i < 0 || j < 0 ? [] : [t.slice(0, i), t.slice(i + 1, j), t.slice(j + 1)];
  if (parts.length !== 3 || !/^[0-9a-f]{8}$/.test(parts[1])) throw new VerifyError("key", "not a verifier key (<name>+<hash>+<base64>)");
  let raw;
  try { raw = b64(parts[2]); } catch { throw new VerifyError("key", "the key is not base64"); }
  if (raw.length !== 33 || raw[0] !== 1) throw new VerifyError("key", "not an Ed25519 verifier key");
  const hash = (await sha256(concat(enc.encode(parts[0] + "\n"), raw))).slice(0, 4);
  if (toHex(hash) !== parts[1]) throw new VerifyError("key", "the key's hash does not match its name and key");
  const key = await crypto.subtle.importKey("raw", raw.slice(1), { name: "Ed25519" }, false, ["verify"]);
  return { name: parts[0], id: hash, key, text: text.trim() };
}

function toHex(u8) { return Array.from(u8, (x) => x.toString(16).padStart(2, "0")).join(""); }

// openCheckpoint verifies a signed checkpoint note with vk (from
// parseVerifierKey) and returns {origin, size, root (bytes), rootB64}.
export async function openCheckpoint(noteText, vk) {
  const i = noteText.lastIndexOf("\n\n");
  if (i < 0 || !noteText.endsWith("\n")) throw new VerifyError("malformed", "the checkpoint is not a signed note");
  const text = noteText.slice(0, i + 1);
  let signed = false;
  for (const line of noteText.slice(i + 2).split("\n")) {
    if (!line) continue;
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== vk.name) continue;
    let sig;
    try { sig = b64(m[2]); } catch { continue; }
    if (sig.length !== 68 || !equal(sig.slice(0, 4), vk.id)) continue;
    if (await crypto.subtle.verify({ name: "Ed25519" }, vk.key, sig.slice(4), enc.encode(text))) signed = true;
  }
  if (!signed) throw new VerifyError("signature", `the checkpoint carries no valid signature of ${vk.name}`);
  const lines = text.split("\n");
  if (lines.length < 4 || !/^[1-9][0-9]*$|^0$/.test(lines[1])) throw new VerifyError("malformed", "the checkpoint's text is not origin, size, root hash");
  if (lines[0] !== vk.name) throw new VerifyError("origin", `the checkpoint is of ${lines[0]}, the key's log is ${vk.name}`);
  let root;
  try { root = b64(lines[2]); } catch { root = null; }
  if (!root || root.length !== 32) throw new VerifyError("malformed", "the checkpoint's root hash is not base64 of 32 bytes");
  return { origin: lines[0], size: Number(lines[1]), root, rootB64: lines[2] };
}

// parseLeaf decodes leaf bytes (docs/proofs.md, "The leaf").
export function parseLeaf(b) {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let o = 0;
  const need = (n) => { if (o + n > b.length) throw new VerifyError("leaf_encoding", "the leaf is truncated"); };
  const u32 = () => { need(4); const v = dv.getUint32(o); o += 4; return v; };
  const field = () => { const n = u32(); need(n); const v = b.slice(o, o + n); o += n; return v; };
  need(17);
  if (b[0] !== 1) throw new VerifyError("leaf_encoding", `leaf version ${b[0]}`);
  const seq = dv.getBigUint64(1);
  o = 17;
  const dec = new TextDecoder();
  const subject = dec.decode(field());
  const headers = {};
  for (let n = u32(); n > 0; n--) { const k = dec.decode(field()); headers[k] = dec.decode(field()); }
  const data = field();
  if (o !== b.length) throw new VerifyError("leaf_encoding", "bytes after the leaf");
  return { seq, subject, headers, data };
}

// verifyInclusion is RFC 9162's inclusion proof check (2.1.3.2).
export async function verifyInclusion(index, size, hash, proof, root) {
  if (index < 0 || index >= size) return false;
  let fn = BigInt(index), sn = BigInt(size - 1), r = hash;
  for (const p of proof) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(p, r);
      if ((fn & 1n) === 0n) while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n; sn >>= 1n;
  }
  return sn === 0n && equal(r, root);
}

// verifyBundle checks an evidence bundle against a verifier key and that
// history (the page's events) is the proven events. It returns
// {checkpoint, events} or throws a VerifyError whose kind names what
// failed: key, signature, origin, malformed, mismatch, leaf_encoding,
// inclusion.
export async function verifyBundle(bundle, keyText, history) {
  const vk = await parseVerifierKey(keyText);
  const cp = await openCheckpoint(bundle.checkpoint, vk);
  if (bundle.tree_size !== cp.size || bundle.root_hash !== cp.rootB64) {
    throw new VerifyError("mismatch", `the bundle states tree ${bundle.tree_size}, the signed checkpoint is ${cp.size}`);
  }
  const seqs = new Set();
  for (const e of bundle.events || []) {
    const at = `seq ${e.seq}: `;
    let leaf;
    try { leaf = b64(e.leaf); } catch { throw new VerifyError("malformed", at + "the leaf is not base64"); }
    const h = await leafHash(leaf);
    if (toB64(h) !== e.leaf_hash) throw new VerifyError("mismatch", at + "leaf_hash is not the leaf's hash");
    const l = parseLeaf(leaf);
    if (l.seq !== BigInt(e.seq) || e.leaf_index !== e.seq - 1) throw new VerifyError("mismatch", at + `the leaf is seq ${l.seq}`);
    if (l.subject !== e.subject) throw new VerifyError("mismatch", at + "the subject is not the leaf's");
    const raw = e.raw != null ? enc.encode(e.raw) : b64(e.raw_b64 || "");
    if (!equal(raw, l.data)) throw new VerifyError("mismatch", at + "the message bytes are not the leaf's");
    for (const [k, v] of Object.entries(e.headers || {})) if (l.headers[k] !== v) throw new VerifyError("mismatch", at + `header ${k} is not the leaf's`);
    if (!(await verifyInclusion(e.seq - 1, cp.size, h, (e.proof || []).map(b64), cp.root))) {
      throw new VerifyError("inclusion", at + `the inclusion proof does not lead to the signed root of ${cp.size} leaves`);
    }
    seqs.add(e.seq);
  }
  for (const e of history || []) {
    if (!seqs.has(e.seq)) throw new VerifyError("mismatch", `the history's seq ${e.seq} is not among the proven events`);
  }
  return { checkpoint: cp, events: seqs.size, key: vk };
}

// Witnesses (contract §16, C2SP tlog-witness and tlog-cosignature): a
// witness checks that each checkpoint extends the last one it saw and adds
// a cosignature to the note. A cosignature/v1 line is
// "— <name> base64(key hash[4] ‖ time[8, big-endian Unix seconds] ‖
// Ed25519 signature[64])", the signature over
// "cosignature/v1\ntime <time>\n" ‖ the checkpoint's text. A witness key
// is "<name>+<hash>+base64(0x04 ‖ Ed25519 public key)"; a plain Ed25519
// note key (type 0x01, a witness that signs the text itself) is accepted
// too, as the ledger's own verifiers do (api/evidence).

// parseWitnessKey parses a witness's verifier key and checks its hash.
export async function parseWitnessKey(text) {
  const t = text.trim(), i = t.indexOf("+"), j = t.indexOf("+", i + 1);
  const parts = i < 0 || j < 0 ? [] : [t.slice(0, i), t.slice(i + 1, j), t.slice(j + 1)];
  if (parts.length !== 3 || !parts[0] || /[\s+]/.test(parts[0]) || !/^[0-9a-f]{8}$/.test(parts[1])) {
    throw new VerifyError("key", "not a witness key (<name>+<hash>+<base64>)");
  }
  let raw;
  try { raw = b64(parts[2]); } catch { throw new VerifyError("key", "the key is not base64"); }
  if (raw.length !== 33 || (raw[0] !== 4 && raw[0] !== 1)) throw new VerifyError("key", "not a cosignature/v1 (0x04) or Ed25519 (0x01) key");
  const hash = (await sha256(concat(enc.encode(parts[0] + "\n"), raw))).slice(0, 4);
  if (toHex(hash) !== parts[1]) throw new VerifyError("key", "the key's hash does not match its name and key");
  const key = await crypto.subtle.importKey("raw", raw.slice(1), { name: "Ed25519" }, false, ["verify"]);
  return { name: parts[0], id: hash, type: raw[0], key, text: t };
}

// checkCosignatures checks, for each witness key (text), whether the
// signed note carries its valid cosignature. It returns one result per key,
// in order: {name, key, verified, time (Date, cosignature/v1 only), why}.
// A key that does not parse is a result with verified false and why.
export async function checkCosignatures(noteText, keyTexts) {
  const i = noteText.lastIndexOf("\n\n");
  if (i < 0 || !noteText.endsWith("\n")) throw new VerifyError("malformed", "the checkpoint is not a signed note");
  const text = noteText.slice(0, i + 1);
  const lines = noteText.slice(i + 2).split("\n").filter(Boolean);
  const out = [];
  for (const kt of keyTexts) {
    let wk;
    try { wk = await parseWitnessKey(kt); } catch (e) {
      out.push({ name: kt.split("+")[0] || kt, key: kt, verified: false, why: e.message });
      continue;
    }
    const r = { name: wk.name, key: wk.text, verified: false, why: "the checkpoint carries no cosignature of this witness" };
    for (const line of lines) {
      const m = /^\u2014 (\S+) (\S+)$/.exec(line);
      if (!m || m[1] !== wk.name) continue;
      let sig;
      try { sig = b64(m[2]); } catch { r.why = "its cosignature line is not base64"; continue; }
      if (sig.length < 4 || !equal(sig.slice(0, 4), wk.id)) { r.why = "a line of that name, made with another key"; continue; }
      let ok = false, time = null;
      if (wk.type === 4) {
        if (sig.length !== 4 + 8 + 64) { r.why = "its cosignature is not cosignature/v1 (76 bytes)"; continue; }
        const t = new DataView(sig.buffer, sig.byteOffset + 4, 8).getBigUint64(0);
        const msg = concat(enc.encode(`cosignature/v1\ntime ${t}\n`), enc.encode(text));
        ok = await crypto.subtle.verify({ name: "Ed25519" }, wk.key, sig.slice(12), msg);
        time = new Date(Number(t) * 1000);
      } else {
        ok = sig.length === 68 && await crypto.subtle.verify({ name: "Ed25519" }, wk.key, sig.slice(4), enc.encode(text));
      }
      if (ok) { r.verified = true; r.time = time; r.why = ""; break; }
      r.why = "its cosignature does not verify";
    }
    out.push(r);
  }
  return out;
}
