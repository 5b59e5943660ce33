// Package canon turns JSON text into one canonical byte form, so that two
// texts meaning the same JSON value compare (and hash) equal.
//
// The canonical form:
//
//   - has no insignificant whitespace;
//   - sorts object members by the UTF-8 bytes of their decoded keys;
//   - writes every string in one fixed way: '"' and '\' as \" and \\,
//     U+0008, U+0009, U+000A, U+000C, U+000D as \b \t \n \f \r, the other
//     control characters below U+0020 as \u00xx (lower-case hex), and every
//     other character as its literal UTF-8 bytes (so "\u00e9", "\u00E9" and
//     "é" are the same string);
//   - keeps numbers as their literal text (1, 1.0 and 1e0 stay different:
//     the ledger compares what was sent, not a float approximation);
//   - keeps arrays in order.
//
// This is RFC 8785 (JCS) for strings, except that keys sort by UTF-8 bytes
// rather than UTF-16 code units and numbers are not reformatted.
//
// Canonical refuses, rather than silently repairs, what has no single
// meaning: invalid UTF-8, escapes of unpaired UTF-16 surrogates ("\ud800"),
// duplicate keys in an object, and nesting deeper than [MaxDepth]. The
// returned error is then a *[Error] matching one of the Err* sentinels.
//
// The implementation is a single-pass recursive-descent scanner over the
// bytes (no reflection, no map[string]any); all functions are pure and safe
// for concurrent use.
package canon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Canonical accepts
// (the top-level value is depth 1).
const MaxDepth = 128

// Sentinels for the kinds of *Error. Match them with errors.Is.
var (
	// ErrSyntax: the input is not one JSON text (bad token, trailing data,
	// raw control character in a string, empty input, ...).
	ErrSyntax = errors.New("canon: invalid JSON")
	// ErrEncoding: invalid UTF-8, or a \u escape of an unpaired surrogate.
	ErrEncoding = errors.New("canon: string is not valid Unicode")
	// ErrDuplicateKey: an object has the same key twice.
	ErrDuplicateKey = errors.New("canon: duplicate object key")
	// ErrTooDeep: nesting deeper than MaxDepth.
	ErrTooDeep = errors.New("canon: nesting too deep")
)

// Error describes why a text has no canonical form.
type Error struct {
	// Kind is one of ErrSyntax, ErrEncoding, ErrDuplicateKey, ErrTooDeep.
	Kind error
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Path is the JSON path of the offending value ("payload.params",
	// "to[3]"); for ErrDuplicateKey it ends with the duplicated key. Empty
	// for the top-level value.
	Path string
	// Msg says what is wrong, for a person.
	Msg string
}

func (e *Error) Error() string {
	s := "canon: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
	if e.Path != "" {
		s += " (at " + e.Path + ")"
	}
	return s
}

// Unwrap returns Kind, so errors.Is(err, ErrDuplicateKey) works.
func (e *Error) Unwrap() error { return e.Kind }

// Canonical returns the canonical form of the JSON text raw (see the
// package documentation). raw may be any JSON value, with surrounding
// whitespace. The result is a new slice; raw is not modified.
func Canonical(raw []byte) ([]byte, error) {
	return Append(make([]byte, 0, len(raw)), raw)
}

// Append appends the canonical form of raw to dst and returns the extended
// slice. On error dst is returned unchanged (up to its length) with the
// error.
func Append(dst, raw []byte) ([]byte, error) {
	p := parsers.Get().(*parser)
	defer p.release()
	p.in, p.pos, p.out = raw, 0, dst
	base := len(dst)
	p.ws()
	if err := p.value(1); err != nil {
		return dst[:base], err
	}
	p.ws()
	if p.pos != len(p.in) {
		return dst[:base], p.fail(ErrSyntax, "unexpected data after the JSON value")
	}
	return p.out, nil
}

// parsers recycles the parsers' scratch space (the member and path stacks
// and the reordering buffer), which would otherwise be most of the
// allocations of a call.
var parsers = sync.Pool{New: func() any { return &parser{} }}

// maxPooled bounds the scratch a pooled parser keeps, so that one huge
// input does not pin its memory for ever.
const maxPooled = 64 << 10

// release drops the references to the caller's input and output and
// returns p to the pool.
func (p *parser) release() {
	p.in, p.out = nil, nil
	p.members, p.path = p.members[:0], p.path[:0]
	if cap(p.tmp) > maxPooled || cap(p.keys) > maxPooled || cap(p.members) > maxPooled/32 || cap(p.path) > maxPooled/32 {
		return // let the GC have it
	}
	p.tmp, p.keys = p.tmp[:0], p.keys[:0]
	parsers.Put(p)
}

// Equal reports whether a and b are both valid JSON texts (in the sense of
// Canonical) with the same canonical form. Invalid input is equal to
// nothing, not even to itself.
func Equal(a, b []byte) bool {
	ca, err := Canonical(a)
	if err != nil {
		return false
	}
	cb, err := Canonical(b)
	if err != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}

// keyRef locates a decoded object key: in the input when the key has no
// escapes, else in the parser's key scratch. Keys are offsets, not slices,
// so that members hold no pointers: sorting them moves plain words (slices
// made the sort and the stacks pay GC write barriers on every move).
type keyRef struct {
	start, end int
	scratch    bool
}

// member is one object member written to out: its decoded key and the
// region [start, end) of out holding `"key":value`.
type member struct {
	key        keyRef
	start, end int
	off        int // input offset of the key, for error reports
}

// pathElem is one step of the path to the value being parsed.
type pathElem struct {
	key   keyRef
	index int // -1 for an object key
}

type parser struct {
	in      []byte
	pos     int
	out     []byte
	members []member   // stack shared by all open objects
	path    []pathElem // only rendered when an error is reported
	tmp     []byte     // scratch for reordering members
	keys    []byte     // decoded escaped keys; escaped strings being decoded
}

// keyBytes returns the decoded key k.
func (p *parser) keyBytes(k keyRef) []byte {
	if k.scratch {
		return p.keys[k.start:k.end]
	}
	return p.in[k.start:k.end]
}

func (p *parser) pathString(extra *pathElem) string {
	var b strings.Builder
	write := func(e pathElem) {
		if e.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			return
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(p.keyBytes(e.key))
	}
	for _, e := range p.path {
		write(e)
	}
	if extra != nil {
		write(*extra)
	}
	return b.String()
}

func (p *parser) fail(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Offset: p.pos, Path: p.pathString(nil), Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) error {
	if p.pos >= len(p.in) {
		return p.fail(ErrSyntax, "unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		if depth > MaxDepth {
			return p.fail(ErrTooDeep, "nesting deeper than %d", MaxDepth)
		}
		return p.object(depth)
	case c == '[':
		if depth > MaxDepth {
			return p.fail(ErrTooDeep, "nesting deeper than %d", MaxDepth)
		}
		return p.array(depth)
	case c == '"':
		_, err := p.str(false)
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return p.fail(ErrSyntax, "unexpected character %q", rune(c))
	}
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return p.fail(ErrSyntax, "invalid literal (expected %s)", lit)
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number validates a JSON number and copies its literal text.
func (p *parser) number() error {
	start := p.pos
	in := p.in
	i := p.pos
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	default:
		p.pos = i
		return p.fail(ErrSyntax, "invalid number")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || !isDigit(in[i]) {
			p.pos = i
			return p.fail(ErrSyntax, "invalid number: digit expected after '.'")
		}
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || !isDigit(in[i]) {
			p.pos = i
			return p.fail(ErrSyntax, "invalid number: digit expected in exponent")
		}
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	}
	p.out = append(p.out, in[start:i]...)
	p.pos = i
	return nil
}

func (p *parser) array(depth int) error {
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.path = append(p.path, pathElem{index: i})
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.ws()
		if p.pos >= len(p.in) {
			return p.fail(ErrSyntax, "unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.ws()
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.fail(ErrSyntax, "expected ',' or ']' in array")
		}
	}
}

func (p *parser) object(depth int) error {
	p.pos++ // '{'
	objStart := len(p.out)
	p.out = append(p.out, '{')
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	for n := 0; ; n++ {
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.fail(ErrSyntax, "object key (a string) expected")
		}
		if n > 0 {
			p.out = append(p.out, ',')
		}
		keyOff := p.pos
		start := len(p.out)
		key, err := p.str(true)
		if err != nil {
			return err
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.fail(ErrSyntax, "expected ':' after object key")
		}
		p.pos++
		p.ws()
		p.out = append(p.out, ':')
		p.path = append(p.path, pathElem{key: key, index: -1})
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.members = append(p.members, member{key: key, start: start, end: len(p.out), off: keyOff})
		p.ws()
		if p.pos >= len(p.in) {
			return p.fail(ErrSyntax, "unexpected end of input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.ws()
			continue
		case '}':
			p.pos++
		default:
			return p.fail(ErrSyntax, "expected ',' or '}' in object")
		}
		break
	}
	ms := p.members[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if c := bytes.Compare(p.keyBytes(ms[i-1].key), p.keyBytes(ms[i].key)); c >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(p.keyBytes(a.key), p.keyBytes(b.key)) })
		for i := 1; i < len(ms); i++ {
			if bytes.Equal(p.keyBytes(ms[i-1].key), p.keyBytes(ms[i].key)) {
				later := ms[i]
				if ms[i-1].off > later.off {
					later = ms[i-1]
				}
				return &Error{
					Kind:   ErrDuplicateKey,
					Offset: later.off,
					Path:   p.pathString(&pathElem{key: later.key, index: -1}),
					Msg:    fmt.Sprintf("duplicate key %q", p.keyBytes(later.key)),
				}
			}
		}
		// Rewrite the members in key order.
		p.tmp = append(p.tmp[:0], p.out[objStart+1:]...)
		p.out = p.out[:objStart+1]
		for i, m := range ms {
			if i > 0 {
				p.out = append(p.out, ',')
			}
			p.out = append(p.out, p.tmp[m.start-objStart-1:m.end-objStart-1]...)
		}
	}
	p.out = append(p.out, '}')
	return nil
}

// str scans the string at p.pos (which is '"'), writes its canonical form to
// out and, when wantKey is set, returns where its decoded value is (in the
// input when it has no escapes, else in p.keys).
func (p *parser) str(wantKey bool) (keyRef, error) {
	in := p.in
	start := p.pos + 1
	i := start
	// Fast path: no escapes and nothing that needs escaping; eight bytes at
	// a time while they are plain printable ASCII.
	for i+8 <= len(in) && plainASCII8(binary.LittleEndian.Uint64(in[i:])) {
		i += 8
	}
	for i < len(in) {
		c := in[i]
		if c == '"' {
			p.out = append(p.out, in[start-1:i+1]...)
			p.pos = i + 1
			return keyRef{start: start, end: i}, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size <= 1 {
			p.pos = i
			return keyRef{}, p.fail(ErrEncoding, "invalid UTF-8 in string")
		}
		i += size
	}
	// Slow path: decode into p.keys, then write canonically. A value's
	// decoded bytes are dropped again; a key's stay until the parse ends.
	mark := len(p.keys)
	buf := append(p.keys, in[start:i]...)
	defer func() {
		p.keys = buf
		if !wantKey {
			p.keys = p.keys[:mark]
		}
	}()
	for {
		if i >= len(in) {
			p.pos = i
			return keyRef{}, p.fail(ErrSyntax, "unterminated string")
		}
		c := in[i]
		switch {
		case c == '"':
			p.pos = i + 1
			p.writeString(buf[mark:])
			return keyRef{start: mark, end: len(buf), scratch: true}, nil
		case c < 0x20:
			p.pos = i
			return keyRef{}, p.fail(ErrSyntax, "control character U+%04X in string must be escaped", c)
		case c == '\\':
			if i+1 >= len(in) {
				p.pos = i
				return keyRef{}, p.fail(ErrSyntax, "unterminated escape")
			}
			e := in[i+1]
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
				i += 2
			case 'b':
				buf = append(buf, '\b')
				i += 2
			case 'f':
				buf = append(buf, '\f')
				i += 2
			case 'n':
				buf = append(buf, '\n')
				i += 2
			case 'r':
				buf = append(buf, '\r')
				i += 2
			case 't':
				buf = append(buf, '\t')
				i += 2
			case 'u':
				r, ok := hex4(in, i+2)
				if !ok {
					p.pos = i
					return keyRef{}, p.fail(ErrSyntax, "invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						r2, ok2 = hex4(in, i+2)
					}
					dec := utf16.DecodeRune(r, r2)
					if !ok2 || dec == utf8.RuneError {
						p.pos = i - 6
						return keyRef{}, p.fail(ErrEncoding, "unpaired UTF-16 surrogate escape")
					}
					r = dec
					i += 6
				}
				buf = utf8.AppendRune(buf, r)
			default:
				p.pos = i
				return keyRef{}, p.fail(ErrSyntax, "invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				p.pos = i
				return keyRef{}, p.fail(ErrEncoding, "invalid UTF-8 in string")
			}
			buf = append(buf, in[i:i+size]...)
			i += size
		}
	}
}

// plainASCII8 reports whether none of the eight bytes of x is '"', '\\',
// a control character (< 0x20) or non-ASCII (>= 0x80): the word-at-a-time
// form of the string scanner's fast-path test (each term is exact about
// whether any byte matches).
func plainASCII8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ (lo * '"')
	b := x ^ (lo * '\\')
	special := (x-lo*0x20) & ^x | (q-lo) & ^q | (b-lo) & ^b | x
	return special&hi == 0
}

func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// writeString writes the decoded (valid UTF-8) string s in canonical form.
func (p *parser) writeString(s []byte) {
	p.out = AppendString(p.out, s)
}
