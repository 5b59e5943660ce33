package projections

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// Binary encodings of the records written for every event that no reader
// takes as stored JSON: the event ref ('E'), the event record ('L'), the
// history entry ('H') and the change ('C'). They are the store's format 2
// (store_format.go); JSON was 960 of the ~2,100 bytes a rebuild wrote per
// event and a good share of its encoding and decoding CPU. An event record keeps only what the fold gave it (the
// decoding's fields and its entries): the summary fields are derived again
// on reading (EventRecord.Derive, as the fold does after every change), and
// the API gets the JSON json.Marshal writes of the whole record
// (appendMarshalEvent).
//
// Strings are a uvarint length and the bytes; numbers uvarints; times a
// varint of unix seconds and a uvarint of nanoseconds (UTC); digests of 64
// lowercase hex digits a flag byte 1 and their 32 bytes, other digests a
// flag byte 0 and the string.

var errBadValue = errors.New("projections: malformed stored value")

func appendBinStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBinStrs(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendBinStr(b, s)
	}
	return b
}

// appendBinDigest appends a digest: 32 bytes when it is 64 lowercase hex
// digits (as ledger.Decode makes them), else the string.
func appendBinDigest(b []byte, d string) []byte {
	if len(d) == 64 && isLowerHex(d) {
		n := len(b)
		b = slices.Grow(b, 33)[:n+33]
		b[n] = 1
		out := b[n+1 : n+33]
		for i := range out {
			out[i] = hexVal(d[2*i])<<4 | hexVal(d[2*i+1])
		}
		return b
	}
	return appendBinStr(append(b, 0), d)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// hexVal is the value of a lowercase hex digit.
func hexVal(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// binReader reads a binary value; the first malformed read sets err and
// every later read returns zero values.
type binReader struct {
	b   []byte
	err error
}

func (r *binReader) fail() {
	if r.err == nil {
		r.err = errBadValue
	}
	r.b = nil
}

func (r *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a length of items that take at least one byte each.
func (r *binReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

// strs reads a []string: nil when empty.
func (r *binReader) strs() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.str()
	}
	return ss
}

func (r *binReader) digest() string {
	if len(r.b) == 0 {
		r.fail()
		return ""
	}
	flag := r.b[0]
	r.b = r.b[1:]
	switch flag {
	case 0:
		return r.str()
	case 1:
		if len(r.b) < 32 {
			r.fail()
			return ""
		}
		s := hex.EncodeToString(r.b[:32])
		r.b = r.b[32:]
		return s
	}
	r.fail()
	return ""
}

func (r *binReader) time() time.Time {
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// end returns the reader's error, or errBadValue when bytes are left.
func (r *binReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errBadValue
	}
	return r.err
}

// appendEventRefBin appends the binary form of an event ref.
func appendEventRefBin(b []byte, r *fold.EventRef) []byte {
	b = binary.AppendUvarint(b, r.Seq)
	b = appendBinStr(b, string(r.Type))
	b = appendBinDigest(b, r.Digest)
	b = appendBinStr(b, r.From)
	b = appendBinStr(b, string(r.Status))
	return appendBinStrs(b, r.Proposals)
}

// decodeEventRef decodes an event ref's stored value into ref.
func decodeEventRef(v []byte, ref *fold.EventRef) error {
	r := binReader{b: v}
	ref.Seq = r.uvarint()
	ref.Type = ledger.Type(r.str())
	ref.Digest = r.digest()
	ref.From = r.str()
	ref.Status = fold.EventStatus(r.str())
	ref.Proposals = r.strs()
	return r.end()
}

// appendEventRecordBin appends the binary form of an event record: what
// the fold gave it, not the fields Derive computes from its entries (nor
// its sequence, which is the key).
func appendEventRecordBin(b []byte, r *EventRecord) []byte {
	t := r.At
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	for _, s := range [...]string{r.Space, r.Key, r.ID, r.Type, r.Kind, r.Form, r.From, r.Reason, r.Method, r.Tool, r.Arg} {
		b = appendBinStr(b, s)
	}
	b = appendBinDigest(b, r.Digest)
	b = binary.AppendUvarint(b, uint64(len(r.Entries)))
	for i := range r.Entries {
		e := &r.Entries[i]
		b = appendBinStr(b, e.Key)
		b = appendBinStr(b, string(e.Effect))
		b = appendBinStr(b, e.Code)
		b = appendBinStr(b, e.Detail)
		b = appendBinStrs(b, e.Anomalies)
		b = appendBinStr(b, e.Target)
		b = appendBinStr(b, e.Outcome)
		b = binary.AppendUvarint(b, e.ResolvedSeq)
	}
	return b
}

// decodeEventRecord decodes the stored record of seq, its summary fields
// derived: the record the fold last wrote.
func decodeEventRecord(seq uint64, v []byte) (*EventRecord, error) {
	r := binReader{b: v}
	rec := &EventRecord{Seq: seq}
	rec.At = r.time()
	for _, p := range [...]*string{&rec.Space, &rec.Key, &rec.ID, &rec.Type, &rec.Kind, &rec.Form, &rec.From, &rec.Reason, &rec.Method, &rec.Tool, &rec.Arg} {
		*p = r.str()
	}
	rec.Digest = r.digest()
	n := r.count()
	rec.Entries = make([]EventEntry, n)
	for i := range rec.Entries {
		e := &rec.Entries[i]
		e.Key = r.str()
		e.Effect = api.Effect(r.str())
		e.Code = r.str()
		e.Detail = r.str()
		e.Anomalies = r.strs()
		e.Target = r.str()
		e.Outcome = r.str()
		e.ResolvedSeq = r.uvarint()
	}
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("decode event record seq %d: %w", seq, err)
	}
	rec.Derive()
	return rec, nil
}

// getBin reads key from r and decodes its value with decode; found is
// false when there is none.
func getBin(r pebble.Reader, key []byte, decode func([]byte) error) (found bool, err error) {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := decode(val); err != nil {
		return true, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}

// jsonOfStored returns the JSON of a stored value whose key is binary
// encoded (event refs and records, as the API and verify show them), v
// itself for any other key, and v when it does not decode.
func jsonOfStored(key, v []byte) []byte {
	if v == nil || len(key) == 0 {
		return v
	}
	switch key[0] {
	case tagEventRef:
		var ref fold.EventRef
		if decodeEventRef(v, &ref) == nil {
			return appendEventRef(nil, &ref)
		}
	case tagHistory:
		var h api.HistoryEntry
		if len(key) >= 8 && decodeHistory(binary.BigEndian.Uint64(key[len(key)-8:]), v, &h) == nil {
			if j, err := appendMarshalHistory(nil, &h); err == nil {
				return j
			}
		}
	case tagChange:
		var c api.Change
		if seq, space, id, err := readChangeKey(key); err == nil && decodeChange(seq, space, id, v, &c) == nil {
			if j, err := appendMarshalChange(nil, &c); err == nil {
				return j
			}
		}
	case tagEvent:
		if len(key) == 9 {
			if rec, err := decodeEventRecord(binary.BigEndian.Uint64(key[1:]), v); err == nil {
				if j, err := appendMarshalEvent(nil, rec); err == nil {
					return j
				}
			}
		}
	}
	return v
}

// appendBinTime appends a time: flag 0 and unix seconds and nanoseconds
// for a UTC time (every time the fold writes), else flag 1 and
// time.Time's binary form, which keeps the zone offset (as JSON did).
func appendBinTime(b []byte, t time.Time) []byte {
	if t.Location() == time.UTC {
		b = binary.AppendVarint(append(b, 0), t.Unix())
		return binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	tb, err := t.MarshalBinary()
	if err != nil { // an offset that is not a whole minute: kept as UTC
		return appendBinTime(b, t.UTC())
	}
	return appendBinStr(append(b, 1), string(tb))
}

func (r *binReader) anyTime() time.Time {
	if len(r.b) == 0 {
		r.fail()
		return time.Time{}
	}
	flag := r.b[0]
	r.b = r.b[1:]
	switch flag {
	case 0:
		return r.time()
	case 1:
		var t time.Time
		if err := t.UnmarshalBinary([]byte(r.str())); err != nil {
			r.fail()
		}
		return t
	}
	r.fail()
	return time.Time{}
}

// appendHistoryBin appends the binary form of a history entry (its
// sequence is in the key).
func appendHistoryBin(b []byte, h *api.HistoryEntry) []byte {
	for _, s := range [...]string{h.ID, h.Type, h.Kind, h.From, string(h.Effect), h.Reason, h.Code, h.Detail,
		h.Target, h.Text, h.Outcome, h.Form, h.Note, h.Status} {
		b = appendBinStr(b, s)
	}
	b = appendBinTime(b, h.At)
	b = appendBinStrs(b, h.Anomalies)
	return binary.AppendUvarint(b, h.ResolvedSeq)
}

// decodeHistory decodes the stored history entry of seq.
func decodeHistory(seq uint64, v []byte, h *api.HistoryEntry) error {
	r := binReader{b: v}
	*h = api.HistoryEntry{Seq: seq}
	var effect string
	for _, p := range [...]*string{&h.ID, &h.Type, &h.Kind, &h.From, &effect, &h.Reason, &h.Code, &h.Detail,
		&h.Target, &h.Text, &h.Outcome, &h.Form, &h.Note, &h.Status} {
		*p = r.str()
	}
	h.Effect = api.Effect(effect)
	h.At = r.anyTime()
	h.Anomalies = r.strs()
	h.ResolvedSeq = r.uvarint()
	return r.end()
}

// appendChangeBin appends the binary form of a change (its sequence,
// space and id are in the key). Anomalies is never nil (noteChange).
func appendChangeBin(b []byte, c *api.Change) []byte {
	for _, s := range [...]string{string(c.State), string(c.PrevState), c.Event, c.DecidedBy} {
		b = appendBinStr(b, s)
	}
	b = appendBinTime(b, c.At)
	b = appendBinStrs(b, c.Anomalies)
	return appendBinStrs(b, c.Added)
}

// decodeChange decodes the stored change of (seq, space, id).
func decodeChange(seq uint64, space, id string, v []byte, c *api.Change) error {
	r := binReader{b: v}
	*c = api.Change{Seq: seq, Space: space, ID: id}
	var state, prev string
	for _, p := range [...]*string{&state, &prev, &c.Event, &c.DecidedBy} {
		*p = r.str()
	}
	c.State, c.PrevState = api.ProposalState(state), api.ProposalState(prev)
	c.At = r.anyTime()
	if c.Anomalies = r.strs(); c.Anomalies == nil {
		c.Anomalies = []string{}
	}
	c.Added = r.strs()
	return r.end()
}

// StoredJSON returns the JSON of the value v stored under key, as Dump
// shows them: the binary records of store format 2 (event refs, event
// records, history entries, changes) as the JSON the API answers, any
// other value as it is (JSON for records, raw bytes for index entries).
// Tools that read a Dump's values go through it.
func StoredJSON(key, v []byte) []byte { return jsonOfStored(key, v) }
