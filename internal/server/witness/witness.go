// Package witness submits the ledger's checkpoints to witnesses (contract
// §16): third parties that check each checkpoint extends the last one they
// saw and cosign it, speaking C2SP tlog-witness (POST <url>/add-checkpoint
// with the old size and a consistency proof) and answering C2SP
// tlog-cosignature (cosignature/v1) signature lines.
//
// Each witness is followed by a goroutine of its own, so a witness that is
// down or slow delays only itself, and nothing here blocks appends or
// signing: the signer (package proofs) keeps signing, and the submitter
// offers each witness the latest checkpoint whenever it changes, retrying
// failures with backoff. A 409 answer states the size the witness has seen;
// the next request starts from it. Cosignatures are added to the stored
// note, and the latest checkpoint holding the quorum is recorded
// (proofs.Log.SetWitnessed) and served by GET /v1/checkpoint.
//
// A witness refusing the consistency proof (422) is an alarm: the ledger
// (or someone with its key) showed it another history. Alarm says so, and
// the server is then not ready. A witness that has seen a larger tree than
// the latest checkpoint signed here (another process of the ledger ahead,
// or this one catching up) is asked again once a checkpoint reaches that
// size: if this tree does not extend what it saw, that is the 422.
package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/projections"
)

// Errors of the package.
var (
	// ErrConfig: a witness flag or an option does not parse.
	ErrConfig = errors.New("witness: bad configuration")
	// errConflict: the witness answered 409 with the size it has seen.
	errConflict = errors.New("witness: the witness has seen another size")
	// errBehind: the witness has seen a larger tree than the latest
	// checkpoint signed here; it is asked again once one reaches it (a
	// tree that then does not extend what it saw is refused, 422).
	errBehind = errors.New("witness: waiting for a checkpoint as large as the witness has seen")
)

// Defaults of Options.
const (
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	DefaultTimeout    = 10 * time.Second
)

// Witness is one witness the ledger asks: its note verifier key and base
// URL (the add-checkpoint request goes to URL + "/add-checkpoint").
type Witness struct {
	VKey string
	URL  string
}

// Parse parses a --witness value: "VKEY URL" (white space between).
func Parse(s string) (Witness, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return Witness{}, fmt.Errorf("%w: --witness %q: want \"VKEY URL\"", ErrConfig, s)
	}
	if _, err := evidence.NewWitnessVerifier(f[0]); err != nil {
		return Witness{}, fmt.Errorf("%w: --witness %q: %w", ErrConfig, s, err)
	}
	u, err := url.Parse(f[1])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Witness{}, fmt.Errorf("%w: --witness %q: the URL must be http(s)://host[/path]", ErrConfig, s)
	}
	return Witness{VKey: f[0], URL: strings.TrimSuffix(f[1], "/")}, nil
}

// Options configures a Submitter.
type Options struct {
	// Witnesses are the witnesses asked. Required (at least one).
	Witnesses []Witness
	// Quorum is how many must cosign a checkpoint for it to be served as
	// witnessed; 0 means all.
	Quorum int
	// Proofs is the checkpoint service: its log, and consistency proofs.
	// Required.
	Proofs *proofs.Service
	// Tree returns the projection in place (consistency proofs). Required.
	Tree func() proofs.Tree
	// Client makes the requests; nil uses a client of its own.
	Client *http.Client
	// Timeout bounds one request. Default DefaultTimeout.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying a witness
	// that failed (doubling from the first to the second). Defaults
	// DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger gets a line per cosignature (debug), per failure (warn) and
	// per alarm (error).
	Logger zerolog.Logger
}

// Status is what the ledger knows of one witness (GET /v1/status).
type Status = api.WitnessStatus

// Submitter asks the witnesses. Run is its body (the caller owns it:
// cancel its ctx and wait); Status, Alarm and Witnesses are safe for
// concurrent use.
type Submitter struct {
	opts      Options
	log       zerolog.Logger
	witnesses evidence.Witnesses
	ws        []*state
	quorumMu  sync.Mutex // serialises the witnessed check
}

// state is one witness's; mu guards the fields after verifier.
type state struct {
	w        Witness
	verifier note.Verifier

	mu         sync.Mutex
	known      int64 // the size the witness has seen, as far as we know
	cosigned   int64
	cosignedAt time.Time
	lastErr    string
	lastErrAt  time.Time
	failures   int
	alarm      string
}

// New checks the options. A witnessed checkpoint recorded before that does
// not hold the quorum of these witnesses is forgotten.
func New(o Options) (*Submitter, error) {
	if len(o.Witnesses) == 0 || o.Proofs == nil || o.Tree == nil {
		return nil, fmt.Errorf("%w: Witnesses, Proofs and Tree are required", ErrConfig)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	var keys []string
	for _, w := range o.Witnesses {
		keys = append(keys, w.VKey)
	}
	ws, err := evidence.ParseWitnesses(keys, o.Quorum)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Submitter{opts: o, witnesses: ws, log: o.Logger.With().Str(logging.KeyComponent, "witnesses").Logger()}
	for i, w := range o.Witnesses {
		s.ws = append(s.ws, &state{w: w, verifier: ws.Keys[i], cosigned: -1})
	}
	if e, ok := o.Proofs.Log().Witnessed(); ok {
		if _, err := ws.Check(e.Note); err != nil {
			if err := o.Proofs.Log().ClearWitnessed(); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Witnessing returns the status of the witnesses (GET /v1/status).
func (s *Submitter) Witnessing() *api.Witnessing {
	out := &api.Witnessing{Quorum: s.witnesses.Need(), WitnessedSize: -1, SignedSize: -1, Witnesses: s.Status()}
	if e, ok := s.opts.Proofs.Log().Witnessed(); ok {
		out.WitnessedSize = e.Checkpoint.Size
	}
	if e, ok := s.opts.Proofs.Log().Latest(); ok {
		out.SignedSize = e.Checkpoint.Size
	}
	return out
}

// Witnesses returns the witness keys and quorum.
func (s *Submitter) Witnesses() evidence.Witnesses { return s.witnesses }

// Status returns each witness's state, in the order configured.
func (s *Submitter) Status() []Status {
	out := make([]Status, 0, len(s.ws))
	for _, w := range s.ws {
		w.mu.Lock()
		st := Status{Name: w.verifier.Name(), URL: w.w.URL, VKey: w.w.VKey, CosignedSize: w.cosigned,
			LastError: w.lastErr, Failures: w.failures, Alarm: w.alarm}
		if !w.cosignedAt.IsZero() {
			t := w.cosignedAt
			st.CosignedAt = &t
		}
		if !w.lastErrAt.IsZero() {
			t := w.lastErrAt
			st.LastErrorAt = &t
		}
		w.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Alarm returns the first witness alarm in force ("" when none): which
// witness refused which sizes.
func (s *Submitter) Alarm() string {
	for _, w := range s.ws {
		w.mu.Lock()
		a := w.alarm
		w.mu.Unlock()
		if a != "" {
			return a
		}
	}
	return ""
}

// Run follows every witness until ctx is done, then returns nil.
func (s *Submitter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, w := range s.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.follow(ctx, w)
		}()
	}
	wg.Wait()
	return nil
}

// follow offers one witness the latest checkpoint whenever it is newer
// than the last the witness cosigned, retrying failures with backoff.
func (s *Submitter) follow(ctx context.Context, w *state) {
	cps := s.opts.Proofs.Log()
	backoff := s.opts.MinBackoff
	conflicts := 0
	for ctx.Err() == nil {
		changed := cps.Changed()
		latest, ok := cps.Latest()
		w.mu.Lock()
		done, known := w.cosigned, w.known
		w.mu.Unlock()
		// Nothing new, or the witness has seen a larger tree than the
		// latest signed here (another process of this ledger is ahead, or
		// this one is catching up): wait for a checkpoint that reaches it.
		if !ok || latest.Checkpoint.Size <= done || latest.Checkpoint.Size < known {
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		err := s.submit(ctx, w, latest)
		switch {
		case err == nil:
			backoff, conflicts = s.opts.MinBackoff, 0
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, errBehind):
			s.failed(w, err)
			continue // waits above for a checkpoint that reaches the witness's
		case errors.Is(err, errConflict) && conflicts < 2:
			conflicts++ // retry at once from the size the witness stated
			continue
		}
		conflicts = 0
		s.failed(w, err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// failed records a failed request.
func (s *Submitter) failed(w *state, err error) {
	w.mu.Lock()
	w.lastErr, w.lastErrAt = err.Error(), time.Now().UTC()
	w.failures++
	n := w.failures
	w.mu.Unlock()
	ev := s.log.Warn()
	if n > 1 {
		ev = s.log.Debug() // the status says it; one warning per outage
	}
	ev.Err(err).Str("witness", w.verifier.Name()).Int("failures", n).Msg("witness did not cosign")
}

// alarm records a refusal of the ledger's history.
func (s *Submitter) alarm(w *state, msg string) {
	w.mu.Lock()
	first := w.alarm == ""
	if first {
		w.alarm = msg
	}
	w.mu.Unlock()
	if first {
		s.log.Error().Str("witness", w.verifier.Name()).Str("alarm", msg).Msg("a witness refused the ledger's history")
	}
}

// submit sends one add-checkpoint request for e and handles the answer.
func (s *Submitter) submit(ctx context.Context, w *state, e proofs.Entry) error {
	w.mu.Lock()
	old := w.known
	w.mu.Unlock()
	size := e.Checkpoint.Size
	name := w.verifier.Name()
	if old > size {
		return fmt.Errorf("%w: witness %s has seen a tree of %d leaves, the latest checkpoint signed here has %d", errBehind, name, old, size)
	}
	p, err := s.opts.Proofs.Consistency(s.opts.Tree(), old, size)
	if err != nil {
		if errors.Is(err, projections.ErrClosed) {
			return fmt.Errorf("witness: the projection is being swapped: %w", err)
		}
		return fmt.Errorf("witness: consistency proof %d → %d: %w", old, size, err)
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	for _, h := range p {
		body.WriteString(h.String())
		body.WriteByte('\n')
	}
	body.WriteByte('\n')
	body.Write(e.Note)

	rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, w.w.URL+"/add-checkpoint", &body)
	if err != nil {
		return fmt.Errorf("witness %s: %w", name, err)
	}
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("witness %s: %w", name, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("witness %s: read the answer: %w", name, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return s.cosigned(w, e, answer)
	case http.StatusConflict:
		n, err := strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("witness %s: 409 without a tree size: %q", name, excerpt(answer))
		}
		w.mu.Lock()
		w.known = n
		w.mu.Unlock()
		if n > size {
			return fmt.Errorf("%w: witness %s has seen a tree of %d leaves, the latest checkpoint signed here has %d", errBehind, name, n, size)
		}
		return fmt.Errorf("%w: witness %s has seen %d leaves, not %d", errConflict, name, n, old)
	case http.StatusUnprocessableEntity:
		msg := fmt.Sprintf("witness %s refused the consistency proof from tree size %d to %d (422 %s): this ledger's tree does not extend the one the witness cosigned", name, old, size, excerpt(answer))
		s.alarm(w, msg)
		return errors.New(msg)
	case http.StatusForbidden, http.StatusNotFound:
		return fmt.Errorf("witness %s: %d %s: the witness does not know this log (origin %q) or its key", name, resp.StatusCode, excerpt(answer), e.Checkpoint.Origin)
	default:
		return fmt.Errorf("witness %s: %d %s", name, resp.StatusCode, excerpt(answer))
	}
}

// cosigned checks and stores a witness's cosignature of e, and records e
// as witnessed when it now holds the quorum.
func (s *Submitter) cosigned(w *state, e proofs.Entry, answer []byte) error {
	name := w.verifier.Name()
	lines := evidence.SignatureLinesOf(e.Note, answer, w.verifier)
	if len(lines) == 0 {
		return fmt.Errorf("witness %s: the answer holds no cosignature that verifies with its key: %q", name, excerpt(answer))
	}
	size := e.Checkpoint.Size
	cps := s.opts.Proofs.Log()
	n, err := cps.AddCosignatures(size, lines)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	w.mu.Lock()
	w.known, w.cosigned, w.cosignedAt = size, size, now
	w.lastErr, w.failures = "", 0
	w.mu.Unlock()
	s.log.Debug().Str("witness", name).Int64("size", size).Msg("cosigned")
	s.quorumMu.Lock()
	defer s.quorumMu.Unlock()
	if _, err := s.witnesses.Check(n); err == nil {
		return cps.SetWitnessed(size)
	}
	return nil
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
