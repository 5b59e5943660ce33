// Package replay reads the ledger's log back out, filtered (contract §9
// `ledger replay`): by sequence or time range, space, event type, or one
// proposal with every event chained to it, and writes the original
// envelopes as JSON lines or republishes them under another subject prefix,
// on the same or another NATS server.
//
// Contract: Read is a pure reader of the LEDGER stream (ordered consumers
// and message gets); it never writes to it, and Republish refuses any
// subject the stream binds. Messages are delivered in sequence order, each
// once, on the calling goroutine.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// Message is one stored message (see archive.Message: Time is the ledger's
// time, the original one for imported messages).
type Message = archive.Message

// ErrFilter is wrapped by errors about the filter itself.
var ErrFilter = errors.New("replay: bad filter")

// HistorySource gives a proposal's history: *projections.Store, or a
// client of the API's history route.
type HistorySource interface {
	History(space, key string) ([]api.HistoryEntry, error)
}

// Filter selects messages. Zero fields do not filter; all given filters
// must hold.
type Filter struct {
	// SinceSeq and UntilSeq bound sequences, both inclusive. An UntilSeq
	// after the end of the log reads to the end.
	SinceSeq, UntilSeq uint64
	// Since and Until bound the ledger time (the fold's time) the way
	// `ledger at --time` does: reading starts at the first selected
	// message at or after Since, and stops before the first selected
	// message after Until. (Stream timestamps are not strictly monotonic;
	// this makes a replay --until T exactly the log `at --time T` folds.)
	Since, Until time.Time
	// Space selects one space.
	Space string
	// Type selects one event type (the subject's type token: proposal,
	// withdraw, reject, fulfil, response, note, approve, expire).
	Type string
	// Proposal selects one proposal of Space (required) and every event
	// chained to it: the events under its key (the proposal, its
	// withdrawals, rejections, fulfilments, approvals, expiry), and the
	// events its history names that are stored under other keys
	// (responses to its fulfilments, explanations of its rejections and
	// withdrawals, notes, a batch withdrawal keyed by another proposal).
	Proposal string
	// Histories is required with Proposal. Its answer reflects what it
	// has folded: chained events under other keys appended after that
	// are not found.
	Histories HistorySource
}

// Validate checks the filter.
func (f *Filter) Validate() error {
	switch {
	case f.UntilSeq > 0 && f.SinceSeq > f.UntilSeq:
		return fmt.Errorf("%w: since seq %d is after until seq %d", ErrFilter, f.SinceSeq, f.UntilSeq)
	case !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until):
		return fmt.Errorf("%w: since %s is after until %s", ErrFilter, f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano))
	case f.Type != "" && !ledger.Type(f.Type).Valid():
		return fmt.Errorf("%w: unknown type %q (want one of %v)", ErrFilter, f.Type, ledger.Types)
	case f.Proposal != "" && f.Space == "":
		return fmt.Errorf("%w: a proposal filter needs its space", ErrFilter)
	case f.Proposal != "" && f.Histories == nil:
		return fmt.Errorf("%w: a proposal filter needs a history source", ErrFilter)
	}
	return nil
}

// Info describes a Read.
type Info struct {
	// Matched is the number of messages passed to fn.
	Matched int
	// LastSeq is the stream's last sequence when Read started.
	LastSeq uint64
}

var errStop = errors.New("replay: stop")

// Read calls fn, in sequence order, for every message of the LEDGER
// stream that passes f (up to the stream's last sequence when Read
// starts). It returns fn's first error as is.
func Read(ctx context.Context, js jetstream.JetStream, f Filter, fn func(*Message) error) (Info, error) {
	if err := f.Validate(); err != nil {
		return Info{}, err
	}
	_, last, imported, err := archive.StreamRange(ctx, js)
	if err != nil {
		return Info{}, err
	}
	info := Info{LastSeq: last}
	until := last
	if f.UntilSeq > 0 && f.UntilSeq < last {
		until = f.UntilSeq
	}
	if last == 0 || f.SinceSeq > until {
		return info, nil
	}
	started := f.Since.IsZero()
	emit := func(m *Message) error {
		if !started {
			if m.Time.Before(f.Since) {
				return nil
			}
			started = true
		}
		if !f.Until.IsZero() && m.Time.After(f.Until) {
			return errStop
		}
		info.Matched++
		return fn(m)
	}
	if f.Proposal != "" {
		err = readProposal(ctx, js, f, until, emit)
	} else {
		o := archive.ScanOptions{FromSeq: f.SinceSeq, ToSeq: until, Filter: subjects.Filter(f.Space, "", f.Type, "")}
		if imported == 0 && !f.Since.IsZero() {
			// Without imported messages the ledger time is the stream
			// time: let the server skip what is before Since.
			o.FromStored = f.Since
		}
		_, err = archive.Scan(ctx, js, o, emit)
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	return info, err
}

// readProposal collects the proposal's key events and the events its
// history names, then emits them in sequence order.
func readProposal(ctx context.Context, js jetstream.JetStream, f Filter, until uint64, emit func(*Message) error) error {
	byseq := map[uint64]*Message{}
	_, err := archive.Scan(ctx, js, archive.ScanOptions{FromSeq: f.SinceSeq, ToSeq: until, Filter: subjects.Filter(f.Space, f.Proposal, "", "")},
		func(m *Message) error {
			byseq[m.Seq] = m
			return nil
		})
	if err != nil {
		return fmt.Errorf("replay: proposal %q in space %q: %w", f.Proposal, f.Space, err)
	}
	hist, err := f.Histories.History(f.Space, f.Proposal)
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return fmt.Errorf("replay: history of proposal %q in space %q: %w", f.Proposal, f.Space, err)
	}
	var missing []uint64
	for _, h := range hist {
		if _, ok := byseq[h.Seq]; !ok && h.Seq >= f.SinceSeq && h.Seq <= until {
			missing = append(missing, h.Seq)
			byseq[h.Seq] = nil
		}
	}
	if len(missing) > 0 {
		stream, err := js.Stream(ctx, subjects.StreamName)
		if err != nil {
			return fmt.Errorf("replay: stream %s: %w", subjects.StreamName, err)
		}
		imported := ledger.ImportedThrough(stream.CachedInfo().Config.Metadata)
		for _, seq := range missing {
			raw, err := stream.GetMsg(ctx, seq)
			if err != nil {
				return fmt.Errorf("replay: proposal %q: get seq %d: %w", f.Proposal, seq, err)
			}
			var orig string
			if seq <= imported {
				orig = raw.Header.Get(ledger.HeaderOriginalTime)
			}
			byseq[seq] = &Message{Seq: seq, Time: ledger.EventTime(seq, imported, orig, raw.Time), Stored: raw.Time.UTC(),
				Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
		}
	}
	seqs := make([]uint64, 0, len(byseq))
	for s := range byseq {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs {
		m := byseq[s]
		if f.Type != "" {
			if ev, err := subjects.ParseEvent(m.Subject); err != nil || ev.Type != f.Type {
				continue
			}
		}
		if err := emit(m); err != nil {
			return err
		}
	}
	return nil
}

// JSONWriter returns an fn for Read that writes each message to w as one
// JSON line in the export format without the hash (seq, time, subject,
// headers, raw or raw_b64).
func JSONWriter(w io.Writer) func(*Message) error {
	var buf []byte
	return func(m *Message) error {
		var err error
		if buf, err = m.Record().AppendJSON(buf[:0]); err != nil {
			return err
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("replay: write seq %d: %w", m.Seq, err)
		}
		return nil
	}
}
