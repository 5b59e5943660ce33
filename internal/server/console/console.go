// Package console is the auditor's web console (contract §15): static files
// embedded in the binary (plain HTML, CSS and JavaScript modules; no build
// step, nothing fetched from elsewhere) that read the HTTP API of package
// api from the browser.
//
// Contract:
//   - Handler serves the console under Prefix (/ui/). The pages — the
//     proposal list (/ui/), a proposal (/ui/proposals/{id}), the
//     statistics (/ui/stats), the recording gaps (/ui/gaps), the event
//     browser (/ui/events), one event raw (/ui/events/{seq}) and the
//     status (/ui/status) — are one
//     HTML document; its script routes by path and reads the query string
//     (space, filters, cursor). Assets are under /ui/assets/.
//   - The files are not secret: they are served without a token. The
//     script asks for the API token on the first 401, keeps it in the
//     tab's sessionStorage and sends it as a bearer token on every API
//     call, /v1/watch included (read with fetch streaming, not
//     EventSource, which cannot send headers).
//   - Evidence (contract §16) is checked in the browser (assets/verify.js,
//     WebCrypto): the verifier key it trusts is the one the auditor pins
//     on the status page (localStorage); the served key is only shown.
//     Witnesses' cosignatures (cosignature/v1) are checked the same way
//     (assets/witness_ui.js) against the witness keys the auditor pinned,
//     or else those /v1/status lists, said so.
//   - Holes (contract §14): the gaps page lists them with each gap's
//     coverage, and a proposal page says when its lifecycle crosses one
//     (assets/holes_ui.js).
//   - Every answer carries a Content-Security-Policy that allows only the
//     console's own scripts, styles and the API (no inline script, no
//     other origin), and nosniff.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Pattern is the ServeMux pattern of the console's routes.
const Pattern = "GET " + Prefix

//go:embed static
var files embed.FS

// static is the embedded tree rooted at static/.
var static = func() fs.FS {
	f, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return f
}()

// csp allows the console's own files and the API on the same origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// modTime is the time the files are served with (the binary's, in effect):
// embedded files have none.
var modTime = time.Now()

// Handler returns the console's handler, to mount at [Pattern].
func Handler() http.Handler {
	index, err := fs.ReadFile(static, "index.html")
	if err != nil {
		panic(err)
	}
	assets := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		rest := strings.TrimPrefix(r.URL.Path, Prefix)
		if strings.HasPrefix(rest, "assets/") {
			clean := path.Clean(rest)
			if _, err := fs.Stat(static, clean); err != nil || !strings.HasPrefix(clean, "assets/") {
				http.Error(w, "no such file", http.StatusNotFound)
				return
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + clean
			assets.ServeHTTP(w, r2)
			return
		}
		if !page(rest) {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		http.ServeContent(w, r, "index.html", modTime, bytes.NewReader(index))
	})
}

// page reports whether rest (the path after /ui/) is one of the pages.
func page(rest string) bool {
	switch {
	case rest == "", rest == "stats", rest == "gaps", rest == "events", rest == "status":
		return true
	case strings.HasPrefix(rest, "proposals/"):
		return len(rest) > len("proposals/")
	case strings.HasPrefix(rest, "events/"):
		return len(rest) > len("events/")
	}
	return false
}
