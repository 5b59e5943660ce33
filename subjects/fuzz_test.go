package subjects

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// validNATSToken reports whether tok can be one token of a NATS subject:
// non-empty, no '.', no wildcard, no whitespace or control character.
func validNATSToken(tok string) bool {
	if tok == "" {
		return false
	}
	for _, r := range tok {
		switch {
		case r == '.', r == '*', r == '>', r <= ' ', r == 0x7f:
			return false
		}
	}
	return true
}

// FuzzTokenRoundTrip checks, for any string s:
//   - EncodeToken(s) is a valid NATS token that does not look like a
//     wildcard, and is s itself exactly when s matches [A-Za-z0-9_-]{1,128};
//   - DecodeToken(EncodeToken(s)) == s for every UTF-8 s; a non-UTF-8 s is
//     refused with ErrBadToken (ids are UTF-8; the ledger never encodes
//     anything else);
//   - read as a token, s decodes only when it is the one canonical token of
//     its value.
func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range []string{"", "default", "env-req-1", "a.b", "*", ">", "~", "~YQ", "ünï", " ", "a b", "\x00",
		strings.Repeat("x", 128), strings.Repeat("x", 129), "\xff", "expire:default/p1", "~~", "--__"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeToken(s)
		if !validNATSToken(tok) {
			t.Fatalf("EncodeToken(%q) = %q is not a valid NATS token", s, tok)
		}
		if (tok == s) != plain(s) {
			t.Fatalf("EncodeToken(%q) = %q: used as is iff plain", s, tok)
		}
		got, err := DecodeToken(tok)
		if utf8.ValidString(s) {
			if err != nil || got != s {
				t.Fatalf("DecodeToken(EncodeToken(%q)) = %q, %v", s, got, err)
			}
		} else if !errors.Is(err, ErrBadToken) {
			t.Fatalf("DecodeToken of non-UTF-8 %q = %q, %v; want ErrBadToken", s, got, err)
		}
		// s as a token: decodable only if canonical.
		if v, err := DecodeToken(s); err == nil {
			if EncodeToken(v) != s {
				t.Fatalf("DecodeToken(%q) = %q but EncodeToken gives %q", s, v, EncodeToken(v))
			}
		} else if !errors.Is(err, ErrBadToken) {
			t.Fatalf("DecodeToken(%q) error %v is not ErrBadToken", s, err)
		}
	})
}
