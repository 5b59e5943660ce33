// The ledger's HTTP API from the browser: JSON reads with the tab's token,
// and /v1/watch read as a stream with fetch (EventSource cannot send an
// Authorization header), resumed with Last-Event-ID after a drop.

const TOKEN_KEY = "mewledger.token";

export class HTTPError extends Error {
  constructor(status, body) {
    const e = body && body.error ? body.error : {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "";
    this.field = e.field || "";
  }
}

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

function headers(extra) {
  const h = Object.assign({ Accept: "application/json" }, extra || {});
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

// askToken shows the token dialog once at a time and resolves when the
// user gave one.
let asking = null;
export function askToken(why) {
  if (asking) return asking;
  const dlg = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  if (why) document.getElementById("token-why").textContent = why;
  asking = new Promise((resolve) => {
    dlg.addEventListener("close", function done() {
      dlg.removeEventListener("close", done);
      const v = input.value.trim();
      input.value = "";
      if (v) { try { sessionStorage.setItem(TOKEN_KEY, v); } catch { /* private mode */ } }
      asking = null;
      resolve(v);
    });
    dlg.showModal();
    input.focus();
  });
  return asking;
}

// get fetches a JSON read; on 401 it asks for a token and retries.
export async function get(path) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, { headers: headers(), cache: "no-store" });
    let body = null;
    try { body = await r.json(); } catch { body = null; }
    if (r.status === 401 && attempt < 3) {
      await askToken(token()
        ? "That token was refused (401). Give an API token with the auditor role."
        : "The API answered 401: give an API token with the auditor role. It is kept for this tab only (sessionStorage) and sent as a bearer token.");
      continue;
    }
    if (!r.ok) throw new HTTPError(r.status, body);
    return body;
  }
}

// getText fetches a text read (GET /v1/checkpoint); on 401 it asks for a
// token and retries. An error answer is an HTTPError.
export async function getText(path) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, { headers: headers({ Accept: "text/plain" }), cache: "no-store" });
    if (r.status === 401 && attempt < 3) {
      await askToken();
      continue;
    }
    if (!r.ok) {
      let body = null;
      try { body = await r.json(); } catch { body = null; }
      throw new HTTPError(r.status, body);
    }
    return r.text();
  }
}

// watch streams /v1/watch?query, calling onChange(change) for each change
// (`event: change`), onHoles(holeChange) for each change of a MEW space's
// holes (`event: holes`, when given) and onState("live" | "reconnecting" |
// "stopped", detail). It resumes after the last id it saw. It returns a
// function that stops it.
export function watch(query, onChange, onState, onHoles) {
  let lastID = query.since_seq != null ? String(query.since_seq) : "";
  let stopped = false;
  let ctrl = null;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (k !== "since_seq" && v != null && v !== "") params.set(k, v);
  }
  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const h = headers({ Accept: "text/event-stream" });
        if (lastID !== "") h["Last-Event-ID"] = lastID;
        const r = await fetch("/v1/watch?" + params.toString(), { headers: h, signal: ctrl.signal, cache: "no-store" });
        if (r.status === 401) {
          onState("reconnecting", "needs a token");
          await askToken();
          continue;
        }
        if (!r.ok || !r.body) throw new HTTPError(r.status, null);
        onState("live");
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        let ev = { data: [], id: null, event: "" };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            let line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line.endsWith("\r")) line = line.slice(0, -1);
            if (line === "") {
              if (ev.id !== null) lastID = ev.id;
              if (ev.data.length && (ev.event === "" || ev.event === "change") && onChange) {
                try { onChange(JSON.parse(ev.data.join("\n"))); } catch (e) { console.error("watch: bad change", e); }
              } else if (ev.data.length && ev.event === "holes" && onHoles) {
                try { onHoles(JSON.parse(ev.data.join("\n"))); } catch (e) { console.error("watch: bad hole change", e); }
              }
              ev = { data: [], id: null, event: "" };
              continue;
            }
            if (line.startsWith(":")) continue;
            const c = line.indexOf(":");
            const field = c < 0 ? line : line.slice(0, c);
            let val = c < 0 ? "" : line.slice(c + 1);
            if (val.startsWith(" ")) val = val.slice(1);
            if (field === "data") ev.data.push(val);
            else if (field === "id") ev.id = val;
            else if (field === "event") ev.event = val;
          }
        }
      } catch (e) {
        if (stopped) break;
        onState("reconnecting", e.message);
      }
      if (stopped) break;
      onState("reconnecting");
      await new Promise((res) => setTimeout(res, 2000));
    }
    onState("stopped");
  };
  run();
  const stop = () => { stopped = true; if (ctrl) ctrl.abort(); };
  // Leaving the page ends the stream: a page kept in the back/forward
  // cache would otherwise hold one of the browser's few connections to
  // this host for each watch.
  window.addEventListener("pagehide", stop);
  return stop;
}

// A page restored from the back/forward cache starts afresh.
window.addEventListener("pageshow", (e) => { if (e.persisted) location.reload(); });
