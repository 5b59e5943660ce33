package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"golang.org/x/mod/sumdb/note"
)

// Verified reads (contract §16). With WithVerifier, VerifiedGet checks what it
// reads against the ledger's signed checkpoints, as the Go checksum
// database's client checks go.sum lines against its signed tree:
//
//   - the proposal's proof (GET /v1/proposals/{id}/proof) is an evidence
//     bundle whose checkpoint must carry a valid signature of the
//     caller's verifier key, whose every event must be a canonical leaf
//     included in that signed tree (evidence.VerifyBundle);
//   - the history the ledger returned must be those events: every entry's
//     sequence is a proven event's, its time the leaf's, its id, kind and
//     sender the envelope's; no proven event at or below the history's
//     last sequence is missing from it;
//   - the checkpoint must extend the last one this client accepted (a
//     consistency proof from GET /v1/proof/consistency), which is then
//     kept in the state file, written atomically with mode 0600.
//
// What is not checked: the proposal's state (its state, proposer,
// decision, ...) is the ledger's fold of those events; the client does not
// fold them again, so a ledger that folded honest events wrongly is not
// caught here (anyone holding the log can fold it again: `ledger rebuild`).
// Nor is it proven that the events are all of the proposal's (the ledger
// chose them), nor the space of the read.

// VerifyState is the verifier of Options: the log's verifier key and the
// file keeping the last accepted checkpoint.
type verifyState struct {
	key      string
	verifier note.Verifier
	file     string

	mu   sync.Mutex
	last []byte // the last accepted signed checkpoint; nil before the first
	read bool   // file was read
}

// WithVerifier makes VerifiedGet available: verifierKey is the log's
// verifier key (`ledger checkpoint key` prints it; a note verifier key
// "<origin>+<hash>+<key>"), stateFile the file keeping the last checkpoint
// the client accepted ("" keeps it in memory only, for the client's
// lifetime). The file is read on the first verified read and rewritten
// atomically (mode 0600, its directory created 0700) each time a larger
// tree is accepted; several clients must not share one file concurrently.
// A key that does not parse is an error wrapping ErrOptions and
// evidence.ErrKey.
func WithVerifier(verifierKey, stateFile string) Option {
	return func(o *Options) error {
		v, err := evidence.NewVerifier(verifierKey)
		if err != nil {
			return err
		}
		o.verify = &verifyState{key: verifierKey, verifier: v, file: stateFile}
		return nil
	}
}

// VerifiedProposal is what VerifiedGet read and proved.
type VerifiedProposal struct {
	// Proposal is the proposal's projected state as the ledger answered
	// it (not itself proven: the fold of the proven events).
	Proposal *api.Proposal
	// History is the proposal's history; each entry is a proven event.
	History *api.History
	// Checkpoint is the signed tree head the events are proven against,
	// and which extends every checkpoint accepted before.
	Checkpoint evidence.Checkpoint
	// Bundle is the evidence itself (`ledger verify --bundle` checks it
	// offline).
	Bundle *evidence.Bundle
	// Cosigners are the witnesses (WithWitnesses) whose cosignature of the
	// checkpoint verified.
	Cosigners []string
}

// VerifiedGet reads a proposal, its history and its proof, and checks them
// (see the package's Verified reads). It needs WithVerifier (else an error
// wrapping ErrOptions). Of opts, the space applies; an as-of read cannot be
// verified against the latest checkpoint and is refused (ErrOptions).
//
// Failures of the evidence wrap client/evidence's sentinels, for
// errors.Is: ErrSignature, ErrOrigin, ErrKey (the checkpoint is not the
// verifier key's), ErrLeafEncoding, ErrInclusion, ErrMismatch (an event or
// history entry does not match its proven leaf), ErrForked,
// ErrRewritten (also ErrForked) and ErrShrank (the log is not an
// extension of the one accepted before), ErrMalformed, ErrNoQuorum (with
// WithWitnesses: the checkpoint lacks the witnesses' quorum). The last accepted
// checkpoint is replaced only by one that passed every check.
func (c *Client) VerifiedGet(ctx context.Context, id string, opts ...ReadOption) (*VerifiedProposal, error) {
	vs := c.opts.verify
	if vs == nil {
		return nil, fmt.Errorf("%w: VerifiedGet needs WithVerifier", ErrOptions)
	}
	if ro := readOptions(opts); ro != nil && (ro.AsOfSeq != 0 || !ro.AsOf.IsZero()) {
		return nil, fmt.Errorf("%w: VerifiedGet reads the present: no as-of", ErrOptions)
	}
	// The history first: the proof, read after, covers at least as much.
	p, err := c.Get(ctx, id, opts...)
	if err != nil {
		return nil, err
	}
	h, err := c.History(ctx, id, opts...)
	if err != nil {
		return nil, err
	}
	var raw []byte
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals/"+url.PathEscape(id)+"/proof", c.readValues(spaceOnly(opts)), nil, "", &raw); err != nil {
		return nil, err
	}
	b, err := evidence.ParseBundle(raw)
	if err != nil {
		return nil, fmt.Errorf("client: proof of %q: %w", id, err)
	}
	ver, err := evidence.VerifyBundleWitnessed(b, vs.key, c.opts.witnesses)
	if err != nil {
		return nil, fmt.Errorf("client: proof of %q: %w", id, err)
	}
	if err := matchHistory(h, b, ver.Leaves); err != nil {
		return nil, fmt.Errorf("client: history of %q: %w", id, err)
	}
	if err := c.accept(ctx, vs, []byte(b.Checkpoint), ver.Checkpoint); err != nil {
		return nil, err
	}
	return &VerifiedProposal{Proposal: p, History: h, Checkpoint: ver.Checkpoint, Bundle: b, Cosigners: ver.Cosigners}, nil
}

// spaceOnly keeps the space of read options (the proof route takes no
// min_seq: it waits for a checkpoint covering the history it holds).
func spaceOnly(opts []ReadOption) []ReadOption {
	ro := readOptions(opts)
	if ro == nil || ro.Space == "" {
		return nil
	}
	return []ReadOption{WithSpace(ro.Space)}
}

// LastCheckpoint returns the last checkpoint the client accepted (read
// from the state file if it was not yet), or ok false when there is none.
// It needs WithVerifier.
func (c *Client) LastCheckpoint() (cp evidence.Checkpoint, ok bool, err error) {
	vs := c.opts.verify
	if vs == nil {
		return cp, false, fmt.Errorf("%w: LastCheckpoint needs WithVerifier", ErrOptions)
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	last, err := vs.load()
	if err != nil || last == nil {
		return cp, false, err
	}
	cp, _, err = evidence.OpenCheckpoint(last, vs.verifier)
	return cp, err == nil, err
}

// load returns the last accepted checkpoint, reading the state file once.
// The caller holds vs.mu.
func (vs *verifyState) load() ([]byte, error) {
	if vs.read || vs.file == "" {
		return vs.last, nil
	}
	data, err := os.ReadFile(vs.file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("client: verifier state: %w", err)
	default:
		vs.last = data
	}
	vs.read = true
	return vs.last, nil
}

// accept checks that cp (signed, already opened) extends the last
// accepted checkpoint, and keeps it when it is larger.
func (c *Client) accept(ctx context.Context, vs *verifyState, signed []byte, cp evidence.Checkpoint) error {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	lastSigned, err := vs.load()
	if err != nil {
		return err
	}
	if lastSigned != nil {
		last, _, err := evidence.OpenCheckpoint(lastSigned, vs.verifier)
		if err != nil {
			return fmt.Errorf("client: verifier state %s: the kept checkpoint: %w", vs.file, err)
		}
		var proof []string
		if cp.Size > last.Size && last.Size > 0 {
			var cons evidence.ConsistencyProof
			q := url.Values{"from": {strconv.FormatInt(last.Size, 10)}, "to": {strconv.FormatInt(cp.Size, 10)}}
			if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proof/consistency", q, nil, "", &cons); err != nil {
				return fmt.Errorf("client: consistency proof from %d to %d: %w", last.Size, cp.Size, err)
			}
			if cons.From != last.Size || cons.To != cp.Size {
				return fmt.Errorf("client: %w: asked for the consistency proof %d→%d, got %d→%d", evidence.ErrMalformed, last.Size, cp.Size, cons.From, cons.To)
			}
			proof = cons.Proof
		}
		hs, err := evidence.ParseHashes(proof)
		if err != nil {
			return fmt.Errorf("client: consistency proof: %w", err)
		}
		if err := evidence.VerifyConsistency(last, cp, hs); err != nil {
			return fmt.Errorf("client: checkpoint %s against the last accepted %s: %w", cp, last, err)
		}
		if cp.Size <= last.Size {
			return nil // the same tree (an equal root): nothing new to keep
		}
	}
	if vs.file != "" {
		if err := writeFileAtomic(vs.file, signed); err != nil {
			return fmt.Errorf("client: verifier state: %w", err)
		}
	}
	vs.last = bytes.Clone(signed)
	return nil
}

// writeFileAtomic writes data to a temporary file beside name (mode 0600)
// and renames it over name, so a crash leaves the old or the new state.
func writeFileAtomic(name string, data []byte) error {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	ok = true
	return nil
}

// matchHistory checks that the history h is the proven events of b (whose
// leaves are ls, in b's order): every entry is a proven event with the
// leaf's time and the envelope's id, kind and sender; every proven event
// up to the history's last sequence is in it.
func matchHistory(h *api.History, b *evidence.Bundle, ls []*evidence.Leaf) error {
	bySeq := make(map[uint64]*evidence.Leaf, len(ls))
	for _, l := range ls {
		bySeq[l.Seq] = l
	}
	var last uint64
	seen := make(map[uint64]bool, len(h.Events))
	for i := range h.Events {
		e := &h.Events[i]
		l := bySeq[e.Seq]
		if l == nil {
			return fmt.Errorf("%w: history entry seq %d (id %q) is not among the proven events", evidence.ErrMismatch, e.Seq, e.ID)
		}
		seen[e.Seq] = true
		last = max(last, e.Seq)
		if !e.At.IsZero() && e.At.UnixNano() != l.Time.UnixNano() {
			return fmt.Errorf("%w: history entry seq %d: time %s, the leaf's is %s", evidence.ErrMismatch, e.Seq, e.At.Format(time.RFC3339Nano), l.Time.Format(time.RFC3339Nano))
		}
		var env struct {
			ID   any `json:"id"`
			Kind any `json:"kind"`
			From any `json:"from"`
		}
		if json.Unmarshal(l.Data, &env) != nil {
			continue // not an envelope (a refused event): only seq and time are its
		}
		for _, f := range []struct {
			name, got string
			want      any
		}{{"id", e.ID, env.ID}, {"kind", e.Kind, env.Kind}, {"from", e.From, env.From}} {
			if w, ok := f.want.(string); ok && f.got != "" && f.got != w {
				return fmt.Errorf("%w: history entry seq %d: %s %q, the proven envelope's is %q", evidence.ErrMismatch, e.Seq, f.name, f.got, w)
			}
		}
	}
	for _, l := range ls {
		if l.Seq <= last && !seen[l.Seq] {
			return fmt.Errorf("%w: the proven event seq %d is missing from the history", evidence.ErrMismatch, l.Seq)
		}
	}
	return nil
}
