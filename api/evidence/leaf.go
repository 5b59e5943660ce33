package evidence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// LeafVersion is the version byte that starts every leaf this package
// encodes. A change to the encoding gets a new version; a decoder refuses
// versions it does not know.
const LeafVersion = 1

// MaxLeafBytes bounds the leaf bytes ParseLeaf accepts (a stored message is
// at most about 1 MiB of envelope plus headers; the bound only keeps a
// hostile input from costing more).
const MaxLeafBytes = 64 << 20

// The identity headers a ledger puts in a leaf (contract §16). The leaf holds
// the message's identity as the ledger sees it, so that a log imported
// into another ledger (which republishes every message under a new
// Nats-Msg-Id and stream time, keeping the originals in headers of its
// own) has the same leaves as the original:
//   - HeaderMsgID: the Nats-Msg-Id the message was first appended with
//     (for an imported message, the one its import header keeps);
//   - HeaderMsgIDClash: present when the appender stored the message
//     under a derived id after a verified clash (contract §4), with the
//     clashing id as its value;
//   - HeaderBridge: the bridge session mark a bridge's appends carry
//     (contract §14): the fold keeps each bridge's last stored envelope from
//     it, so it defines what the message means and is in its leaf.
//
// A message stored without a Nats-Msg-Id (a plain NATS publish) has no
// HeaderMsgID in its leaf.
const (
	HeaderMsgID      = "Nats-Msg-Id"
	HeaderMsgIDClash = "Ledger-Msg-Id-Clash"
	HeaderBridge     = "Ledger-Bridge"
)

// Header is one header of a leaf: a name and its single value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Leaf is one stored message as the Merkle tree holds it.
//
// # Encoding (version 1)
//
// [Leaf.MarshalBinary] writes, with every integer big-endian and every
// variable-length field preceded by its length as a 4-byte unsigned
// integer (u32), so that no two different leaves encode to the same bytes:
//
//	offset  size      field
//	0       1         version: 0x01
//	1       8         seq: the stream sequence (u64, ≥ 1)
//	9       8         time: the ledger's time for the message, Unix
//	                  nanoseconds UTC (i64, two's complement)
//	17      4 + n     u32(len(subject)) ‖ subject (n ≥ 1 bytes)
//	…       4         u32(number of headers)
//	        per header, names in strictly increasing byte order:
//	        4 + n     u32(len(name)) ‖ name (n ≥ 1)
//	        4 + n     u32(len(value)) ‖ value
//	…       4 + n     u32(len(data)) ‖ data: the message's original bytes
//
// and nothing after. The leaf hash is tlog.RecordHash of these bytes:
// SHA-256(0x00 ‖ bytes) (RFC 6962).
type Leaf struct {
	// Seq is the message's stream sequence; the leaf's index in the tree
	// is Seq-1.
	Seq uint64
	// Time is the ledger's time for the message (contract §4: its stream
	// timestamp; for an imported message, the original one it carries).
	// Only its Unix nanoseconds are encoded; ParseLeaf returns it in UTC.
	Time time.Time
	// Subject is the subject the message is stored under.
	Subject string
	// Headers are the identity headers (HeaderMsgID, HeaderMsgIDClash),
	// sorted by name, each name once. MarshalBinary sorts a copy; a
	// repeated name is an error.
	Headers []Header
	// Data is the message's original bytes.
	Data []byte
}

// Index returns the leaf's index in the tree: Seq-1.
func (l *Leaf) Index() int64 { return int64(l.Seq) - 1 }

// Header returns the value of the named header, "" when absent.
func (l *Leaf) Header(name string) string {
	for _, h := range l.Headers {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// minTime and maxTime bound the times a leaf can encode (int64 Unix
// nanoseconds: years 1677 to 2262).
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// AppendBinary appends the leaf's encoding (see [Leaf]) to b. It fails,
// wrapping ErrLeafEncoding, for a zero Seq (or one beyond the int64 tree
// index range), an empty subject, a time outside int64 nanoseconds, an
// empty or repeated header name, or a field over 4 GiB; then b is returned
// unchanged.
func (l *Leaf) AppendBinary(b []byte) ([]byte, error) {
	if l.Seq == 0 || l.Seq > math.MaxInt64 {
		return b, fmt.Errorf("%w: seq %d out of range", ErrLeafEncoding, l.Seq)
	}
	if l.Subject == "" {
		return b, fmt.Errorf("%w: seq %d: empty subject", ErrLeafEncoding, l.Seq)
	}
	if l.Time.Before(minTime) || l.Time.After(maxTime) {
		return b, fmt.Errorf("%w: seq %d: time %s out of range", ErrLeafEncoding, l.Seq, l.Time)
	}
	hs := l.Headers
	if !slices.IsSortedFunc(hs, cmpHeader) {
		hs = slices.SortedStableFunc(slices.Values(hs), cmpHeader)
	}
	for i, h := range hs {
		if h.Name == "" {
			return b, fmt.Errorf("%w: seq %d: empty header name", ErrLeafEncoding, l.Seq)
		}
		if i > 0 && hs[i-1].Name == h.Name {
			return b, fmt.Errorf("%w: seq %d: header %q twice", ErrLeafEncoding, l.Seq, h.Name)
		}
		if len(h.Name) > math.MaxUint32 || len(h.Value) > math.MaxUint32 {
			return b, fmt.Errorf("%w: seq %d: header %q too long", ErrLeafEncoding, l.Seq, h.Name)
		}
	}
	if len(l.Subject) > math.MaxUint32 || len(l.Data) > math.MaxUint32 || len(hs) > math.MaxUint32 {
		return b, fmt.Errorf("%w: seq %d: field too long", ErrLeafEncoding, l.Seq)
	}
	b = append(b, LeafVersion)
	b = binary.BigEndian.AppendUint64(b, l.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(l.Time.UnixNano()))
	b = appendField(b, l.Subject)
	b = binary.BigEndian.AppendUint32(b, uint32(len(hs)))
	for _, h := range hs {
		b = appendField(b, h.Name)
		b = appendField(b, h.Value)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Data)))
	return append(b, l.Data...), nil
}

// MarshalBinary returns the leaf's encoding (see [Leaf] and AppendBinary).
func (l *Leaf) MarshalBinary() ([]byte, error) {
	return l.AppendBinary(make([]byte, 0, 64+len(l.Subject)+len(l.Data)))
}

// Hash returns the leaf hash: tlog.RecordHash of the encoding.
func (l *Leaf) Hash() (tlog.Hash, error) {
	b, err := l.MarshalBinary()
	if err != nil {
		return tlog.Hash{}, err
	}
	return tlog.RecordHash(b), nil
}

// LeafHash returns the leaf hash of encoded leaf bytes:
// SHA-256(0x00 ‖ b). It does not check that b is a valid encoding.
func LeafHash(b []byte) tlog.Hash { return tlog.RecordHash(b) }

func cmpHeader(x, y Header) int { return strings.Compare(x.Name, y.Name) }

func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// ParseLeaf decodes leaf bytes, accepting only the canonical encoding:
// ParseLeaf(b) succeeds exactly when b is MarshalBinary of the Leaf it
// returns. Any other input is an error wrapping ErrLeafEncoding that says
// what is wrong and at which offset. The Leaf's Data aliases b.
func ParseLeaf(b []byte) (*Leaf, error) {
	if len(b) > MaxLeafBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrLeafEncoding, len(b), MaxLeafBytes)
	}
	d := leafDecoder{b: b}
	if v := d.u8(); d.err == nil && v != LeafVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrLeafEncoding, v, LeafVersion)
	}
	l := &Leaf{}
	l.Seq = d.u64("seq")
	if d.err == nil && (l.Seq == 0 || l.Seq > math.MaxInt64) {
		d.fail("seq %d out of range", l.Seq)
	}
	l.Time = time.Unix(0, int64(d.u64("time"))).UTC()
	l.Subject = string(d.field("subject"))
	if d.err == nil && l.Subject == "" {
		d.fail("empty subject")
	}
	n := d.u32("header count")
	if d.err == nil && int64(n) > int64(len(d.b)-d.off)/8 { // each header takes at least 8 bytes
		d.fail("header count %d larger than the bytes left", n)
	}
	if d.err == nil && n > 0 {
		l.Headers = make([]Header, 0, n)
	}
	for i := uint32(0); d.err == nil && i < n; i++ {
		name := string(d.field("header name"))
		value := string(d.field("header value"))
		if d.err != nil {
			break
		}
		if name == "" {
			d.fail("empty header name")
		} else if i > 0 && l.Headers[i-1].Name >= name {
			d.fail("header %q after %q: names not in increasing order", name, l.Headers[i-1].Name)
		}
		l.Headers = append(l.Headers, Header{Name: name, Value: value})
	}
	l.Data = d.field("data")
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the data", len(d.b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	if l.Data == nil {
		l.Data = []byte{}
	}
	return l, nil
}

// leafDecoder reads the fields of a leaf; the first failure sticks.
type leafDecoder struct {
	b   []byte
	off int
	err error
}

func (d *leafDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at offset %d: %s", ErrLeafEncoding, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *leafDecoder) need(n int, what string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b)-d.off < n {
		d.fail("truncated %s: need %d bytes, have %d", what, n, len(d.b)-d.off)
		return false
	}
	return true
}

func (d *leafDecoder) u8() byte {
	if !d.need(1, "version") {
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *leafDecoder) u64(what string) uint64 {
	if !d.need(8, what) {
		return 0
	}
	d.off += 8
	return binary.BigEndian.Uint64(d.b[d.off-8:])
}

func (d *leafDecoder) u32(what string) uint32 {
	if !d.need(4, what) {
		return 0
	}
	d.off += 4
	return binary.BigEndian.Uint32(d.b[d.off-4:])
}

func (d *leafDecoder) field(what string) []byte {
	n := d.u32(what + " length")
	if !d.need(int(n), what) {
		return nil
	}
	d.off += int(n)
	return d.b[d.off-int(n) : d.off : d.off]
}

// Equal reports whether l and m encode to the same bytes (times compared
// by their Unix nanoseconds, headers in sorted order).
func (l *Leaf) Equal(m *Leaf) bool {
	if l.Seq != m.Seq || l.Subject != m.Subject || l.Time.UnixNano() != m.Time.UnixNano() || !bytes.Equal(l.Data, m.Data) {
		return false
	}
	a := slices.SortedStableFunc(slices.Values(l.Headers), cmpHeader)
	c := slices.SortedStableFunc(slices.Values(m.Headers), cmpHeader)
	return slices.Equal(a, c)
}
