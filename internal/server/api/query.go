package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// maxEcho bounds how much of a client's value an error message repeats.
const maxEcho = 64

// echo returns s for an error message, cut to maxEcho bytes (with its
// length) so that a huge parameter or header is never answered whole.
func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := s[:maxEcho]
	for len(cut) > 0 && !utfStart(s[len(cut)]) {
		cut = cut[:len(cut)-1]
	}
	return cut + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

func utfStart(b byte) bool { return b&0xC0 != 0x80 }

// checkQuery refuses a query string that does not parse as a whole:
// url.ParseQuery drops a pair it cannot parse (a ';' separator, a bad
// %-escape), and r.URL.Query() returns the rest, so `?space=ops;research`
// would otherwise be read as no space at all: the default space (issue 29,
// item 6). The refusal names the parameter of the first pair that does
// not parse.
func checkQuery(raw string) *api.Error {
	if _, err := url.ParseQuery(raw); err == nil {
		return nil
	}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		key, _, _ := strings.Cut(pair, "=")
		if _, err := url.ParseQuery(pair); err != nil {
			field := key
			if k, err := url.QueryUnescape(key); err == nil && !strings.Contains(k, ";") {
				field = k
			} else if k, _, _ := strings.Cut(key, ";"); k != "" {
				field = k
			}
			return badParam(echo(field), "query parameter %q does not parse (%v): nothing is guessed; use & between parameters and %%XX escapes", echo(pair), err)
		}
	}
	return badParam("", "the query string does not parse")
}

// spaceParam returns the request's ?space=, or def when the parameter is
// absent. A space given empty is a refusal naming the field: only a
// missing parameter means the default. (Its length and encoding are
// checked by the caller: the appender on writes, validSpace on reads.)
func spaceParam(q url.Values, def string) (string, *api.Error) {
	v, ok := q[paramSpace]
	if !ok {
		return def, nil
	}
	if len(v) != 1 || v[0] == "" {
		s := ""
		if len(v) > 0 {
			s = v[0]
		}
		return "", badParam(paramSpace, "space %q is not a space name (1..%d bytes of UTF-8); omit the parameter for the default space", echo(s), ledger.MaxSpaceBytes)
	}
	if v[0] == AllSpaces {
		return "", badParam(paramSpace, `"*" is not a space name: it means every space, on the event routes only`)
	}
	return v[0], nil
}

// refuseBadQuery answers 400 when r's query does not parse (see
// checkQuery) and reports whether it did.
func refuseBadQuery(w http.ResponseWriter, r *http.Request) bool {
	if e := checkQuery(r.URL.RawQuery); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return true
	}
	return false
}
