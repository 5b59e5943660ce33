package api

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzCheckQuery: checkQuery accepts exactly the query strings
// url.ParseQuery parses whole (nothing dropped, so nothing guessed), and
// a refusal's field and message stay short whatever the query holds.
func FuzzCheckQuery(f *testing.F) {
	for _, s := range []string{"", "space=ops", "space=ops;research", "space=%zz", "a=1&b=2", "kernel=0;space=x",
		"space=" + strings.Repeat("s", 300), "%zz=1", "a;b", "=;", "space=a&space=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e := checkQuery(raw)
		_, err := url.ParseQuery(raw)
		if (e == nil) != (err == nil) {
			t.Fatalf("checkQuery(%q) = %v, url.ParseQuery: %v", raw, e, err)
		}
		if e != nil && (e.Field != "" && len(e.Field) > 3*maxEcho || len(e.Message) > 8*maxEcho+200) {
			t.Fatalf("checkQuery(%q): field of %d bytes, message of %d", raw, len(e.Field), len(e.Message))
		}
	})
}
