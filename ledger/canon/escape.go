package canon

import "unicode/utf8"

// The one JSON string escaper of the code base, in two modes: canonical
// (AppendString, what Canonical writes) and encoding/json's default
// (AppendStringHTML, what json.Marshal writes).

const hexDigits = "0123456789abcdef"

// plain[c] is true for the bytes AppendString copies as they are: every
// byte but '"', '\' and the control characters below U+0020 (bytes of
// multi-byte UTF-8 sequences included). htmlPlain[c] is true for the bytes
// AppendStringHTML copies as they are: the ASCII ones of plain but <, >
// and &; it looks at every non-ASCII rune.
var plain, htmlPlain, encPlain [256]bool

func init() {
	for c := 0x20; c < 256; c++ {
		plain[c] = c != '"' && c != '\\'
		htmlPlain[c] = plain[c] && c < utf8.RuneSelf && c != '<' && c != '>' && c != '&'
		encPlain[c] = plain[c] && c < utf8.RuneSelf
	}
}

// AppendString appends the canonical JSON encoding of the string s to dst
// (see the package doc): '"' and '\' as \" and \\, \b \t \n \f \r, the
// other control characters below U+0020 as \u00xx (lower-case hex), every
// other byte as it is. s must be valid UTF-8 (its bytes are copied as they
// are). It takes a string or a []byte.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendString(dst, s, &plain)
}

// AppendStringHTML appends s as encoding/json's Marshal encodes a string
// (HTML escaping on, its default): as AppendString, but <, > and & as
// \u003c, \u003e, \u0026, U+2028 and U+2029 as \u2028 and \u2029, and
// each byte of invalid UTF-8 as \ufffd. Any s is accepted.
func AppendStringHTML[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendString(dst, s, &htmlPlain)
}

// AppendStringNoHTML appends s as an encoding/json Encoder with
// SetEscapeHTML(false) encodes a string (what the HTTP API writes): as
// AppendStringHTML, but <, > and & as they are.
func AppendStringNoHTML[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendString(dst, s, &encPlain)
}

func appendString[S ~string | ~[]byte](dst []byte, s S, safe *[256]bool) []byte {
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if safe[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf { // AppendStringHTML and AppendStringNoHTML only: a rune to look at
			r, size := decodeRune(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, s[last:i]...)
				dst = append(dst, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, s[last:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			last = i
			continue
		}
		dst = append(dst, s[last:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		last = i
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// decodeRune is utf8.DecodeRune for a string or a []byte.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.DecodeRuneInString(string(s)) // a named string or []byte type
}
