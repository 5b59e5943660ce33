package bench

import (
	"bytes"
	"fmt"
	"time"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// space is the space every benchmark event is appended to.
const space = ledger.DefaultSpace

// seed makes every run generate the same bytes.
const seed = 6

// event is one envelope with what the raw baseline publishes it with: the
// subject and Nats-Msg-Id the ledger would derive (computed before the
// clock starts, so the baseline pays nothing for them).
type event struct {
	raw     []byte
	subject string
	msgID   string
}

// proposalKind marks a proposal in the workload's (encoding/json) output.
var proposalKind = []byte(`"kind":"mcp/proposal"`)

// generate returns the workload.BenchMix stream, padded to padTo bytes,
// up to and including its proposals-th proposal, or its events-th event
// when events > 0.
func generate(proposals, events, padTo int) ([]event, error) {
	g := workload.New(workload.Options{Seed: seed, Mix: workload.BenchMix, PadTo: padTo})
	evs := make([]event, 0, max(events, proposals*5/3+16))
	for n := 0; (events > 0 && len(evs) < events) || (events <= 0 && n < proposals); {
		raw := g.Next()
		if bytes.Contains(raw, proposalKind) {
			n++
		}
		d, err := ledger.Decode(raw, ledger.DecodeOptions{})
		if err != nil {
			return nil, fmt.Errorf("bench: workload envelope refused: %w", err)
		}
		evs = append(evs, event{
			raw:     raw,
			subject: subjects.Event{Space: space, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String(),
			msgID:   d.MsgID(space),
		})
	}
	return evs, nil
}

// generateRaws returns the first n envelopes of the stream generate
// returns, without deriving subjects, packed.
func generateRaws(n, padTo int) *packed {
	g := workload.New(workload.Options{Seed: seed, Mix: workload.BenchMix, PadTo: padTo})
	p := &packed{ends: make([]int, 0, n)}
	for range n {
		p.add(g.Next())
	}
	return p
}

// packed is a list of byte strings in one buffer. The lag figure keeps
// millions of envelopes (with their subjects and Nats-Msg-Ids) in the
// process it measures: as separate objects (and with their decodings) they
// were tens of millions of heap objects for every collection of that
// process to mark, CPU taken from the ledger under test. Packed, they are
// two.
type packed struct {
	buf  []byte
	ends []int
}

func (p *packed) add(b []byte) {
	p.buf = append(p.buf, b...)
	p.ends = append(p.ends, len(p.buf))
}

func (p *packed) len() int { return len(p.ends) }

// at returns entry i, which shares the buffer (not to be modified).
func (p *packed) at(i int) []byte {
	start := 0
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]:p.ends[i]]
}

// raws returns the envelopes of evs.
func raws(evs []event) [][]byte {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		out[i] = e.raw
	}
	return out
}

// epoch is the stream time of the first synthetic event (folded without
// NATS); each next one is a millisecond later.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// streamGen is an endless, bounded-memory source of stored events for
// folding directly into a store: a chain of workload generators (a fresh
// one, with a fresh id prefix, every chunk events), so that the
// generator's own memory does not grow with N.
type streamGen struct {
	padTo, chunk int
	g            *workload.Generator
	n, gen       int
	seq          uint64
}

func newStreamGen(padTo, chunk int) *streamGen {
	return &streamGen{padTo: padTo, chunk: chunk}
}

// next returns the next event (sequences from 1) and its decoded form.
func (s *streamGen) next() (fold.Event, *ledger.Decoded, error) {
	if s.g == nil || s.n == s.chunk {
		s.gen++
		s.g = workload.New(workload.Options{Seed: seed + int64(s.gen), Mix: workload.BenchMix, PadTo: s.padTo, Prefix: fmt.Sprintf("g%d-", s.gen)})
		s.n = 0
	}
	raw := s.g.Next()
	s.n++
	d, err := ledger.Decode(raw, ledger.DecodeOptions{})
	if err != nil {
		return fold.Event{}, nil, fmt.Errorf("bench: workload envelope refused: %w", err)
	}
	s.seq++
	return fold.Event{
		Seq:     s.seq,
		Time:    epoch.Add(time.Duration(s.seq) * time.Millisecond),
		Subject: subjects.Event{Space: space, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String(),
		Raw:     raw,
	}, d, nil
}
