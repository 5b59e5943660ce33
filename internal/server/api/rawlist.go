package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// The list route's fast path. A page of 100 proposals spent 88% of its CPU
// decoding each stored record with encoding/json and encoding it again
// (ledger bench, reads figure, CPU profile of api.list: json.Unmarshal
// 8.1 s and Encoder.Encode 3.5 s of 13.1 s), which made the list p99 miss
// its 5 ms target. When the reader can hand out the stored records
// (projections.Store.ListRaw), the route writes them as they are, turned
// into exactly the bytes the decoding path writes: the stored records are
// json.Marshal's output (HTML-escaped), the route's encoder does not escape
// HTML, and RawMessage members keep whatever escaping they have. A record
// this cannot reproduce exactly (a kernel proposal, U+2028/U+2029, U+FFFD
// written for invalid UTF-8, a list member stored as null) goes through
// the decoding path on its own.

// rawLister is a Reader that can return a page's stored records.
type rawLister interface {
	ListRaw(q projections.ListQuery) (projections.RawPage, error)
}

// errNoRawList is returned by swapReader.ListRaw when the reader in place
// cannot.
var errNoRawList = errors.New("api: reader has no raw list")

// rawListBody returns the body writeJSON(api.List{...}) writes for page,
// normalized as the decoding path normalizes.
func rawListBody(page projections.RawPage) ([]byte, error) {
	n := 64 + len(page.NextCursor)
	for _, rec := range page.Proposals {
		n += len(rec) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"proposals":[`...)
	for i, rec := range page.Proposals {
		if i > 0 {
			b = append(b, ',')
		}
		if out, ok := appendAPIRecord(b, rec); ok {
			b = out
			continue
		}
		var p api.Proposal
		if err := json.Unmarshal(rec, &p); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		enc := newEncoder(&buf)
		if err := enc.Encode(normalize(&p)); err != nil {
			return nil, err
		}
		b = append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	b = append(b, `],"next_cursor":`...)
	if !plainCursor(page.NextCursor) {
		c, err := json.Marshal(page.NextCursor)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	} else {
		b = append(b, '"')
		b = append(b, page.NextCursor...)
		b = append(b, '"')
	}
	return append(b, '}', '\n'), nil
}

// plainCursor reports whether c needs no escaping at all (cursors are
// base64url).
func plainCursor(c string) bool {
	for i := 0; i < len(c); i++ {
		switch x := c[i]; {
		case x >= 'a' && x <= 'z', x >= 'A' && x <= 'Z', x >= '0' && x <= '9', x == '-', x == '_', x == '=':
		default:
			return false
		}
	}
	return true
}

var (
	kernelMember = []byte(`"kernel":`)
	null         = []byte(`:null`)
	nullLists    = [][]byte{[]byte(`"to":null`), []byte(`"rejections":null`), []byte(`"fulfillments":null`), []byte(`"anomalies":null`)}
)

// appendAPIRecord appends the stored proposal rec as the decoding path
// would write it: the \u003c, \u003e and \u0026 escapes json.Marshal put
// in strings undone, except inside params (a RawMessage, which the
// decoding path copies as stored). false when rec needs that path.
func appendAPIRecord(b, rec []byte) ([]byte, bool) {
	if bytes.Contains(rec, kernelMember) || hasLineSepOrReplacement(rec) {
		return b, false
	}
	if bytes.Contains(rec, null) {
		for _, m := range nullLists {
			if bytes.Contains(rec, m) {
				return b, false
			}
		}
	}
	ps, pe, ok := memberSpan(rec, "params")
	if !ok {
		return b, false
	}
	b = appendUnescapedHTML(b, rec[:ps])
	b = append(b, rec[ps:pe]...)
	return appendUnescapedHTML(b, rec[pe:]), true
}

// hasLineSepOrReplacement reports whether rec holds the escapes
// json.Marshal writes for U+2028, U+2029 and invalid UTF-8 (\u2028,
// \u2029, \ufffd), which the decoding path writes differently inside
// params or not at all.
func hasLineSepOrReplacement(rec []byte) bool {
	for i := bytes.IndexByte(rec, '\\'); i >= 0 && i+6 <= len(rec); {
		if rec[i+1] == 'u' {
			if h := string(rec[i+2 : i+6]); h == "2028" || h == "2029" || h == "fffd" {
				return true
			}
		}
		j := bytes.IndexByte(rec[i+2:], '\\') // an escaped backslash is skipped whole
		if j < 0 {
			return false
		}
		i += 2 + j
	}
	return false
}

// appendUnescapedHTML appends s with every unescaped \u003c, \u003e and
// \u0026 turned into <, > and &. s is part of valid JSON text in which
// those sequences only occur in strings.
func appendUnescapedHTML(b, s []byte) []byte {
	for {
		i := bytes.Index(s, []byte(`\u00`))
		if i < 0 || i+6 > len(s) {
			return append(b, s...)
		}
		// Escaped only when preceded by an even number of backslashes.
		k := i
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		var c byte
		if (i-k)%2 == 0 {
			switch string(s[i+4 : i+6]) {
			case "3c":
				c = '<'
			case "3e":
				c = '>'
			case "26":
				c = '&'
			}
		}
		if c == 0 {
			b = append(b, s[:i+2]...)
			s = s[i+2:]
			continue
		}
		b = append(b, s[:i]...)
		b = append(b, c)
		s = s[i+6:]
	}
}

// memberSpan returns where the value of the top-level member name of the
// JSON object obj starts and ends.
func memberSpan(obj []byte, name string) (start, end int, ok bool) {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	i = skipWS(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		ke := skipString(obj, i)
		match := string(obj[i+1:ke-1]) == name
		i = skipWS(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, false
		}
		i = skipWS(obj, i+1)
		ve := skipValue(obj, i)
		if match {
			return i, ve, true
		}
		i = skipWS(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return 0, 0, false
		}
		i = skipWS(obj, i+1)
	}
	return 0, 0, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// writeList answers a list request from the outcome of ListRaw: the same
// statuses, headers and body as the decoding path.
func (a *API) writeList(w http.ResponseWriter, r *http.Request, lq projections.ListQuery, err error, body func() ([]byte, error)) {
	switch {
	case errors.Is(err, projections.ErrBadQuery):
		// Every filter was checked before; what the store can still refuse
		// is the cursor.
		field := ""
		if lq.Cursor != "" {
			field = paramCursor
		}
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadQuery, Field: field, Message: err.Error()})
		return
	case err != nil:
		a.internal(w, r, err)
		return
	}
	b, err := body()
	if err != nil {
		a.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // an error means the client went away: nothing to do
}
