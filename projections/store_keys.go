package projections

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mewledger/ledger/api"
)

// Key layout of the Pebble store.
//
// Every key starts with a one-byte table tag. String components (spaces,
// proposal ids, event ids, index values) are written with an order-preserving,
// prefix-free escape: each 0x00 byte becomes 0x00 0xFF and the component ends
// with 0x00 0x01. No escaped component is a prefix of another, so an id that
// contains any byte (including 0x00, '/', or the bytes of a terminator) can
// never collide with another key, and a (space, key) prefix scan never runs
// into a longer key that merely starts with the same bytes. Numbers are 8-byte
// big-endian; signed ones (unix nanoseconds) have their sign bit flipped so
// that they sort numerically; "^seq" is the bitwise complement of a sequence,
// so that an ascending scan yields the highest (newest) sequence first.
//
//	0x00 "format"                              → the store format (store_format.go; not part of the fold)
//	0x00 "stream"                              → the stream identity (store_meta.go; not part of the fold)
//	0x01 "checkpoint"                          → seq (8 B BE): last applied stream sequence
//	'C' seq space id                           → Change, binary (encode_bin.go; the change index, store_changes.go)
//	'D' deadline space id                      → "" : pending proposals with expires_at
//	'E' space eventID                          → EventRef, binary (encode_bin.go)
//	'F' space key                              → decimal count of history entries filed under key
//	                                             while it named no proposal (batch_aux.go)
//	'G' space seq                              → JSON Gap: a bridge's recording gap (gaps.go)
//	'H' space key seq                          → HistoryEntry, binary (encode_bin.go; History is one prefix scan)
//	'I' space kind [value] ^createdSeq id      → created_at (8 B, unix nanos, sign-flipped)
//	'J' field value seq                       → "" : the event index's per-event keys: from, proposal, id (store_events.go)
//	'K' nanos seq                             → "" : stream time → sequence (store_events.go)
//	'L' seq                                   → EventRecord, binary (encode_bin.go): one per stored message (store_events.go)
//	'O' space target                           → JSON []Orphan (the waiting list of target)
//	'P' space id                               → JSON Proposal, the bytes GET serves (encode.go)
//	'Q' field value block                      → the event index's posting lists (store_postings.go)
//	'R' space bridge+"\x00"+mew space         → JSON []RecorderRun: a recorder's closed runs (holes.go)
//	'S' space                                  → "" : the space has data (Spaces)
//	'T' space                                  → JSON Stats
//	'U' space mew space                        → JSON []Hole: a MEW space's holes as of its last hole change (holes_watch.go)
//	'V' space id+"\x00"+digest                 → decimal seq: a superseded version of a reused id (batch_version.go)
//	'W' space seq+mew space                    → JSON HoleChange: the hole change index (holes_watch.go)
//	'X' space seq                              → JSON ParkedEvent: an orphan event's bytes, stored once (batch_aux.go)
//
// Sequences in 'G' and 'X' keys are 8-byte big-endian strings written as
// escaped components (parkedID); in 'C' keys a plain 8-byte prefix.
//
// Index kinds ('I'): 'a' all proposals of the space (no value component),
// 's' state, 'p' proposer, 't' target (one entry per distinct `to` member
// or target of the seeds' targeting fields), 'f' form (Proposal.Forms),
// 'n' anomaly (one per distinct anomaly), 'k' kernel action_type, 'r' kernel
// resource_type, 'd' kernel domain. Empty values are not indexed. Every index
// of a space orders its entries by the same suffix (^createdSeq, id), which is
// what makes a List cursor valid across indexes and lets List intersect
// several indexes by seeking (a zigzag join) instead of loading records.
//
// Every key tag of the store is in the block below, and nowhere else.
//
// Times in index values and in the deadline key are clamped to the int64
// unix-nanosecond range (years 1677..2262).
const (
	tagCheckpoint   = 0x01
	tagBridge       = 'B'
	tagChange       = 'C'
	tagDeadline     = 'D'
	tagEventRef     = 'E'
	tagFiled        = 'F'
	tagGap          = 'G'
	tagHistory      = 'H'
	tagIndex        = 'I'
	tagEventIndex   = 'J' // the event index (store_events.go)
	tagEventTime    = 'K' // stream time → sequence (store_events.go)
	tagEvent        = 'L' // the event record (store_events.go)
	tagTree         = 'M' // the Merkle tree's stored hashes (tree.go)
	tagOrphans      = 'O'
	tagProposal     = 'P'
	tagRuns         = 'R'
	tagSpace        = 'S'
	tagStats        = 'T'
	tagHoles        = 'U' // a MEW space's holes (holes_watch.go)
	tagHoleChange   = 'W' // the hole change index (holes_watch.go)
	tagVersion      = 'V'
	tagParked       = 'X'
	tagEventPosting = 'Q' // the event index's posting lists (store_postings.go)
)

// Index kinds.
const (
	idxAll          = 'a'
	idxState        = 's'
	idxProposer     = 'p'
	idxTarget       = 't'
	idxAnomaly      = 'n'
	idxActionType   = 'k'
	idxResourceType = 'r'
	idxDomain       = 'd'
	idxForm         = 'f' // the seeds' lifecycle forms of the proposal's events (Proposal.Forms)
)

var checkpointKey = []byte("\x01checkpoint")

// appendEsc appends the escaped, terminated form of s.
func appendEsc(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0x00 {
			b = append(b, 0x00, 0xFF)
			continue
		}
		b = append(b, c)
	}
	return append(b, 0x00, 0x01)
}

var errBadKey = errors.New("projections: malformed store key")

// readEsc decodes one escaped component from the front of b and returns it
// with the rest of b.
func readEsc(b []byte) (string, []byte, error) {
	i := bytes.IndexByte(b, 0x00)
	if i < 0 || i+1 >= len(b) {
		return "", nil, errBadKey
	}
	switch b[i+1] {
	case 0x01: // no escaped byte: the common case
		return string(b[:i]), b[i+2:], nil
	case 0xFF:
		return readEscSlow(b)
	}
	return "", nil, errBadKey
}

func readEscSlow(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != 0x00 {
			out = append(out, c)
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errBadKey
		}
		switch b[i+1] {
		case 0x01:
			return string(out), b[i+2:], nil
		case 0xFF:
			out = append(out, 0x00)
			i++
		default:
			return "", nil, errBadKey
		}
	}
	return "", nil, errBadKey
}

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendNanos appends a signed unix-nano time so that it sorts numerically.
func appendNanos(b []byte, n int64) []byte { return appendU64(b, uint64(n)^(1<<63)) }

func readNanos(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// clampNanos returns t as unix nanoseconds, clamped to the int64 range.
func clampNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanoTime):
		return math.MinInt64
	case t.After(maxNanoTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func spaceKey(space string) []byte {
	return appendEsc([]byte{tagSpace}, space)
}

func proposalKey(space, id string) []byte {
	return appendSpaceID(make([]byte, 0, 1+len(space)+len(id)+4), tagProposal, space, id)
}

// appendSpaceID appends the key tag space id (proposals, event refs,
// orphans, aux records).
func appendSpaceID(b []byte, tag byte, space, id string) []byte {
	return appendEsc(appendEsc(append(b, tag), space), id)
}

func historyPrefix(space, key string) []byte {
	return appendSpaceID(make([]byte, 0, 1+len(space)+len(key)+4+8), tagHistory, space, key)
}

func eventRefKey(space, id string) []byte {
	return appendSpaceID(make([]byte, 0, 1+len(space)+len(id)+4), tagEventRef, space, id)
}

func orphansKey(space, target string) []byte {
	b := make([]byte, 0, 1+len(space)+len(target)+4)
	return appendEsc(appendEsc(append(b, tagOrphans), space), target)
}

func statsKey(space string) []byte {
	return appendEsc([]byte{tagStats}, space)
}

// indexPrefix is the prefix of one index of a space: for idxAll value is
// ignored.
func indexPrefix(space string, kind byte, value string) []byte {
	return appendIndexPrefix(make([]byte, 0, 1+len(space)+2+1+len(value)+2), space, kind, value)
}

func appendIndexPrefix(b []byte, space string, kind byte, value string) []byte {
	b = appendEsc(append(b, tagIndex), space)
	b = append(b, kind)
	if kind != idxAll {
		b = appendEsc(b, value)
	}
	return b
}

// indexSuffix is the position of a proposal within any index of its space.
func indexSuffix(createdSeq uint64, id string) []byte {
	b := make([]byte, 0, 8+len(id)+2)
	return appendEsc(appendU64(b, ^createdSeq), id)
}

func readIndexSuffix(b []byte) (seq uint64, id string, err error) {
	if len(b) < 8 {
		return 0, "", errBadKey
	}
	seq = ^binary.BigEndian.Uint64(b)
	id, rest, err := readEsc(b[8:])
	if err != nil || len(rest) != 0 {
		return 0, "", errBadKey
	}
	return seq, id, nil
}

func deadlineKey(nanos int64, space, id string) []byte {
	return appendDeadlineKey(make([]byte, 0, 1+8+len(space)+len(id)+4), nanos, space, id)
}

func appendDeadlineKey(b []byte, nanos int64, space, id string) []byte {
	b = appendNanos(append(b, tagDeadline), nanos)
	return appendEsc(appendEsc(b, space), id)
}

func readDeadlineKey(k []byte) (nanos int64, space, id string, err error) {
	if len(k) < 9 || k[0] != tagDeadline {
		return 0, "", "", errBadKey
	}
	nanos = readNanos(k[1:9])
	space, rest, err := readEsc(k[9:])
	if err != nil {
		return 0, "", "", err
	}
	id, rest, err = readEsc(rest)
	if err != nil || len(rest) != 0 {
		return 0, "", "", errBadKey
	}
	return nanos, space, id, nil
}

// prefixEnd returns the smallest key greater than every key that starts with
// p (nil when there is none).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// arena is scratch memory that keys and values are appended to; the slices
// it hands out stay valid (and unchanged) until reset, even when it grows.
type arena struct{ b []byte }

// take returns the bytes appended since len start.
func (a *arena) take(start int) []byte { return a.b[start:len(a.b):len(a.b)] }

// reset forgets everything handed out; the memory is reused.
func (a *arena) reset() { a.b = a.b[:0] }

// indexEntries appends to dst every secondary key of p with its value, in
// key order (without duplicates), their bytes in a: the List index entries
// (valued with p's created_at) and, when p is pending with an expires_at,
// its deadline entry (empty value). A nil p has none. Commit deletes the
// entries of the old version that the new one lacks and writes the new ones
// that differ.
func (a *arena) indexEntries(dst []kv, p *api.Proposal) []kv {
	if p == nil {
		return dst
	}
	first := len(dst)
	st := len(a.b)
	a.b = appendNanos(a.b, clampNanos(p.CreatedAt))
	val := a.take(st)
	add := func(kind byte, value string) {
		if kind != idxAll && value == "" {
			return
		}
		st := len(a.b)
		a.b = appendEsc(appendU64(appendIndexPrefix(a.b, p.Space, kind, value), ^p.CreatedSeq), p.ID)
		dst = append(dst, kv{key: a.take(st), val: val})
	}
	add(idxAll, "")
	add(idxState, string(p.State))
	add(idxProposer, p.Proposer)
	for _, t := range p.To {
		add(idxTarget, t)
	}
	for _, t := range p.Targets { // to and the seeds' targeting fields (contract §2)
		add(idxTarget, t.ID)
	}
	for _, f := range p.Forms {
		add(idxForm, f)
	}
	for _, an := range p.Anomalies {
		add(idxAnomaly, an)
	}
	if k := p.Kernel; k != nil {
		add(idxActionType, string(k.ActionType))
		if k.Target != nil {
			add(idxResourceType, k.Target.ResourceType)
			add(idxDomain, k.Target.Domain)
		}
	}
	if p.State == api.StatePending && p.ExpiresAt != nil {
		st := len(a.b)
		a.b = appendDeadlineKey(a.b, clampNanos(*p.ExpiresAt), p.Space, p.ID)
		dst = append(dst, kv{key: a.take(st)})
	}
	es := dst[first:]
	slices.SortFunc(es, func(x, y kv) int { return bytes.Compare(x.key, y.key) })
	// A repeated `to` member or anomaly is one entry.
	es = slices.CompactFunc(es, func(x, y kv) bool { return bytes.Equal(x.key, y.key) })
	return dst[:first+len(es)]
}

// Cursors are base64url (no padding) of: version byte 1, created_seq (8 B BE),
// the proposal id's raw bytes. A cursor names the last proposal of a page; the
// next page starts strictly after it in (created_seq desc, id asc) order,
// which every index of a space shares.
const cursorVersion = 1

func encodeCursor(seq uint64, id string) string {
	b := make([]byte, 0, 9+len(id))
	b = append(b, cursorVersion)
	b = appendU64(b, seq)
	b = append(b, id...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string) (seq uint64, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("%w: cursor %q: %v", ErrBadQuery, c, err)
	}
	if len(b) < 9 || b[0] != cursorVersion {
		return 0, "", fmt.Errorf("%w: cursor %q is not a List cursor", ErrBadQuery, c)
	}
	return binary.BigEndian.Uint64(b[1:9]), string(b[9:]), nil
}
