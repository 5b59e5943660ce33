package evidence

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// BundleFormat is the format tag of a bundle of this version.
const BundleFormat = "mewledger-evidence/v1"

// MaxBundleBytes bounds a bundle ReadBundle and ParseBundle accept.
const MaxBundleBytes = 512 << 20

// Bundle is a self-contained piece of evidence: messages of the log with
// their leaves and inclusion proofs against one signed checkpoint. The
// ledger's `GET /v1/proposals/{id}/proof` answers one (the history of a
// proposal, every event of it), `ledger proof ID -o FILE` saves it, and
// [VerifyBundle] checks it with nothing but the log's verifier key.
//
// As JSON (one object; unknown fields are refused):
//
//	{"format":"mewledger-evidence/v1","space":"default","proposal":"p1",
//	 "checkpoint":"<signed note>","tree_size":42,"root_hash":"<base64>",
//	 "events":[{"seq":7,"leaf_index":6,"time":"2026-…Z","subject":"ledger.default.p1.proposal.alice",
//	            "headers":{"Nats-Msg-Id":"default/p1/…"},"raw":"{…}",
//	            "leaf":"<base64>","leaf_hash":"<base64>","proof":["<base64>",…]}]}
//
// What the signature and the proofs establish: the log that signed the
// checkpoint holds each event's leaf at index seq-1 of its tree of
// tree_size leaves, and each event's stated fields are that leaf's. What
// they do not: that the events are every event of the proposal (the
// ledger's fold chose them; anyone holding the log can fold it again), and
// space and proposal, which only say what was asked for.
type Bundle struct {
	Format   string `json:"format"`
	Space    string `json:"space,omitempty"`
	Proposal string `json:"proposal,omitempty"`
	// Checkpoint is the signed note (C2SP tlog-checkpoint) the proofs are
	// against.
	Checkpoint string `json:"checkpoint"`
	// TreeSize and RootHash repeat the checkpoint's size and root hash,
	// for readers; VerifyBundle checks they agree with the signed note.
	TreeSize int64        `json:"tree_size"`
	RootHash string       `json:"root_hash"`
	Events   []EventProof `json:"events"`
}

// EventProof is one message with its leaf and inclusion proof.
type EventProof struct {
	// Seq is the stream sequence; LeafIndex is Seq-1.
	Seq       uint64 `json:"seq"`
	LeafIndex int64  `json:"leaf_index"`
	// Time is the ledger's time for the message, RFC 3339 with
	// nanoseconds, UTC.
	Time    string `json:"time"`
	Subject string `json:"subject"`
	// Headers are the leaf's identity headers, name → value.
	Headers map[string]string `json:"headers,omitempty"`
	// Raw is the message's original bytes when they are valid UTF-8,
	// else RawB64 holds them in standard base64; exactly one is set.
	Raw    *string `json:"raw,omitempty"`
	RawB64 *string `json:"raw_b64,omitempty"`
	// Leaf is the leaf bytes (Leaf.MarshalBinary), standard base64.
	Leaf string `json:"leaf"`
	// LeafHash is tlog.RecordHash(leaf bytes), standard base64.
	LeafHash string `json:"leaf_hash"`
	// Proof is the RFC 6962 inclusion proof of leaf LeafIndex in the
	// bundle's tree, standard base64 hashes from the leaf up.
	Proof []string `json:"proof"`
}

// NewEventProof returns the EventProof of a leaf (already encoded as
// leafBytes, which must be l's encoding) and its inclusion proof.
func NewEventProof(l *Leaf, leafBytes []byte, proof tlog.RecordProof) EventProof {
	e := EventProof{
		Seq:       l.Seq,
		LeafIndex: l.Index(),
		Time:      l.Time.UTC().Format(time.RFC3339Nano),
		Subject:   l.Subject,
		Leaf:      base64.StdEncoding.EncodeToString(leafBytes),
		LeafHash:  LeafHash(leafBytes).String(),
		Proof:     FormatHashes(proof),
	}
	if len(l.Headers) > 0 {
		e.Headers = make(map[string]string, len(l.Headers))
		for _, h := range l.Headers {
			e.Headers[h.Name] = h.Value
		}
	}
	if utf8.Valid(l.Data) {
		s := string(l.Data)
		e.Raw = &s
	} else {
		s := base64.StdEncoding.EncodeToString(l.Data)
		e.RawB64 = &s
	}
	return e
}

// RawBytes returns the message's original bytes (Raw or RawB64). An error
// wraps ErrMalformed.
func (e *EventProof) RawBytes() ([]byte, error) {
	switch {
	case e.Raw != nil && e.RawB64 == nil:
		return []byte(*e.Raw), nil
	case e.RawB64 != nil && e.Raw == nil:
		b, err := base64.StdEncoding.Strict().DecodeString(*e.RawB64)
		if err != nil {
			return nil, fmt.Errorf("%w: seq %d: raw_b64 is not standard base64", ErrMalformed, e.Seq)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%w: seq %d: exactly one of raw and raw_b64 must be present", ErrMalformed, e.Seq)
	}
}

// ParseBundle decodes a bundle and checks its shape: the format tag, at
// least one event, sequences strictly increasing, every hash, proof and
// leaf well-formed base64. It does not verify anything (VerifyBundle
// does). An error wraps ErrMalformed.
func ParseBundle(data []byte) (*Bundle, error) {
	if len(data) > MaxBundleBytes {
		return nil, fmt.Errorf("%w: bundle of %d bytes, over %d", ErrMalformed, len(data), MaxBundleBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Bundle
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: bundle: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: bundle: data after the object", ErrMalformed)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// ReadBundle reads and parses a bundle from r, reading at most
// MaxBundleBytes+1 bytes.
func ReadBundle(r io.Reader) (*Bundle, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("evidence: read bundle: %w", err)
	}
	return ParseBundle(data)
}

func (b *Bundle) check() error {
	if b.Format != BundleFormat {
		return fmt.Errorf("%w: bundle format %q, want %q", ErrMalformed, b.Format, BundleFormat)
	}
	if b.Checkpoint == "" {
		return fmt.Errorf("%w: bundle has no checkpoint", ErrMalformed)
	}
	if b.TreeSize < 0 {
		return fmt.Errorf("%w: tree_size %d", ErrMalformed, b.TreeSize)
	}
	if _, err := tlog.ParseHash(b.RootHash); err != nil {
		return fmt.Errorf("%w: root_hash %q is not base64 of %d bytes", ErrMalformed, b.RootHash, tlog.HashSize)
	}
	if len(b.Events) == 0 {
		return fmt.Errorf("%w: bundle has no events", ErrMalformed)
	}
	// An event whose stated seq is not its own leaf's is the one at
	// fault, named before the order of the seqs is judged (an event 0
	// with a wrong seq is not blamed on event 1).
	for i := range b.Events {
		e := &b.Events[i]
		if lb, err := base64.StdEncoding.Strict().DecodeString(e.Leaf); err == nil {
			if l, err := ParseLeaf(lb); err == nil && l.Seq != e.Seq {
				return fmt.Errorf("%w: %w: event %d: seq %d: its leaf's seq is %d", ErrMalformed, ErrMismatch, i, e.Seq, l.Seq)
			}
		}
	}
	for i := range b.Events {
		e := &b.Events[i]
		if e.Seq == 0 || (i > 0 && e.Seq <= b.Events[i-1].Seq) {
			return fmt.Errorf("%w: event %d: seq %d not increasing from 1 (event %d's is %d)", ErrMalformed, i, e.Seq, max(i-1, 0), b.Events[max(i-1, 0)].Seq)
		}
		if _, err := e.RawBytes(); err != nil {
			return err
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(e.Leaf); err != nil {
			return fmt.Errorf("%w: seq %d: leaf is not standard base64", ErrMalformed, e.Seq)
		}
		if _, err := tlog.ParseHash(e.LeafHash); err != nil {
			return fmt.Errorf("%w: seq %d: leaf_hash %q is not base64 of %d bytes", ErrMalformed, e.Seq, e.LeafHash, tlog.HashSize)
		}
		if _, err := ParseHashes(e.Proof); err != nil {
			return fmt.Errorf("seq %d: proof: %w", e.Seq, err)
		}
	}
	return nil
}

// Marshal returns the bundle as indented JSON (with a final newline).
func (b *Bundle) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("evidence: encode bundle: %w", err)
	}
	return buf.Bytes(), nil
}

// Verified is what VerifyBundle established.
type Verified struct {
	// Checkpoint is the signed tree head the events are proven against.
	Checkpoint Checkpoint
	// Note is the opened checkpoint note: the log's signature in Sigs,
	// others (cosigners the verifier does not know) in UnverifiedSigs.
	Note *note.Note
	// Leaves are the proven leaves, in the bundle's order.
	Leaves []*Leaf
	// Cosigners are the witnesses whose cosignature of the checkpoint
	// verified (VerifyBundleWitnessed), in the order of their keys.
	Cosigners []string
}

// VerifyBundle checks a bundle against the log's verifier key, with no
// other input: the checkpoint's signature and origin, then for every
// event that its leaf bytes are a canonical leaf (ErrLeafEncoding), that
// the event's stated fields and leaf hash are the leaf's (ErrMismatch),
// and that the inclusion proof leads from the leaf hash at index seq-1 to
// the signed root hash (ErrInclusion).
//
// A bad key wraps ErrKey; a checkpoint that does not verify, ErrSignature,
// ErrOrigin or ErrMalformed (then no event is checked); a tree_size or
// root_hash that is not the signed one, ErrMismatch. Event failures are
// all reported, joined (errors.Join), each naming its seq. On success
// the result says what was proven.
func VerifyBundle(b *Bundle, verifierKey string) (*Verified, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	v, err := NewVerifier(verifierKey)
	if err != nil {
		return nil, err
	}
	cp, n, err := OpenCheckpoint([]byte(b.Checkpoint), v)
	if err != nil {
		return nil, err
	}
	if b.TreeSize != cp.Size || b.RootHash != cp.Hash.String() {
		return nil, fmt.Errorf("%w: bundle states tree %d %s, the signed checkpoint is %d %s", ErrMismatch, b.TreeSize, b.RootHash, cp.Size, cp.Hash)
	}
	out := &Verified{Checkpoint: cp, Note: n}
	var errs []error
	for i := range b.Events {
		l, err := verifyEvent(cp, &b.Events[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d: seq %d: %w", i, b.Events[i].Seq, err))
			continue
		}
		out.Leaves = append(out.Leaves, l)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// verifyEvent checks one event of a bundle whose shape check passed.
func verifyEvent(cp Checkpoint, e *EventProof) (*Leaf, error) {
	leafBytes, _ := base64.StdEncoding.Strict().DecodeString(e.Leaf)
	l, err := ParseLeaf(leafBytes)
	if err != nil {
		return nil, err
	}
	if err := e.matches(l); err != nil {
		return nil, err
	}
	h := LeafHash(leafBytes)
	if e.LeafHash != h.String() {
		return nil, fmt.Errorf("%w: leaf_hash %s, the leaf's is %s", ErrMismatch, e.LeafHash, h)
	}
	proof, _ := ParseHashes(e.Proof)
	if err := VerifyInclusion(cp, l.Index(), h, proof); err != nil {
		return nil, err
	}
	return l, nil
}

// matches reports, wrapping ErrMismatch, the first stated field of e that
// differs from leaf l.
func (e *EventProof) matches(l *Leaf) error {
	if e.Seq != l.Seq {
		return fmt.Errorf("%w: seq %d, the leaf's is %d", ErrMismatch, e.Seq, l.Seq)
	}
	if e.LeafIndex != l.Index() {
		return fmt.Errorf("%w: leaf_index %d, seq %d is leaf %d", ErrMismatch, e.LeafIndex, l.Seq, l.Index())
	}
	t, err := time.Parse(time.RFC3339Nano, e.Time)
	if err != nil || t.UnixNano() != l.Time.UnixNano() {
		return fmt.Errorf("%w: time %q, the leaf's is %s", ErrMismatch, e.Time, l.Time.Format(time.RFC3339Nano))
	}
	if e.Subject != l.Subject {
		return fmt.Errorf("%w: subject %q, the leaf's is %q", ErrMismatch, e.Subject, l.Subject)
	}
	want := make(map[string]string, len(l.Headers))
	for _, h := range l.Headers {
		want[h.Name] = h.Value
	}
	if !maps.Equal(e.Headers, want) && !(len(e.Headers) == 0 && len(want) == 0) {
		return fmt.Errorf("%w: headers %v, the leaf's are %v", ErrMismatch, sortedHeaders(e.Headers), sortedHeaders(want))
	}
	raw, err := e.RawBytes()
	if err != nil {
		return err
	}
	if !bytes.Equal(raw, l.Data) {
		at := 0
		for at < min(len(raw), len(l.Data)) && raw[at] == l.Data[at] {
			at++
		}
		return fmt.Errorf("%w: the message bytes (%d) differ from the leaf's (%d) at byte %d", ErrMismatch, len(raw), len(l.Data), at)
	}
	return nil
}

func sortedHeaders(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+": "+m[k])
	}
	return out
}

// NewBundle returns the bundle of events proven against the signed
// checkpoint signed (whose parsed form is cp), for the proposal id of
// space (informational: see [Bundle]).
func NewBundle(signed []byte, cp Checkpoint, space, id string, events []EventProof) *Bundle {
	return &Bundle{
		Format: BundleFormat, Space: space, Proposal: id,
		Checkpoint: string(signed), TreeSize: cp.Size, RootHash: cp.Hash.String(),
		Events: events,
	}
}
