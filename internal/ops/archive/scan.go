package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// ErrBeyondLog is returned when a sequence asked for is after the end of
// the log.
var ErrBeyondLog = errors.New("archive: beyond the end of the log")

// Message is one stored message of the LEDGER stream.
type Message struct {
	Seq uint64
	// Time is the ledger's time for the message (ledger.EventTime): the
	// original time of an imported message, else Stored.
	Time time.Time
	// Stored is the stream timestamp.
	Stored  time.Time
	Subject string
	Header  nats.Header
	Data    []byte
}

// Record returns the message as an export record (without hash).
func (m *Message) Record() *Record {
	return &Record{Seq: m.Seq, Time: FormatTime(m.Time), Subject: m.Subject, Headers: m.Header, Raw: m.Data}
}

// ScanOptions selects what Scan reads.
type ScanOptions struct {
	// FromSeq is the first sequence to read; 0 means the stream's first.
	FromSeq uint64
	// ToSeq is the last sequence to read; 0 means the stream's last when
	// Scan starts (appends after that are not read). A ToSeq after the
	// end of the log is ErrBeyondLog.
	ToSeq uint64
	// FromStored, if set, starts at the first message stored at or after
	// it (the server's deliver-by-start-time), when that is after FromSeq.
	// It compares the stream timestamp, not the ledger time: callers
	// filtering by ledger time use it only as a lower bound.
	FromStored time.Time
	// Filter is a subject filter (subjects.Filter); "" reads every subject.
	Filter string
	// HeadersOnly reads headers without payloads.
	HeadersOnly bool
	// BatchSize is how many messages are pulled at a time (default 500).
	BatchSize int
}

// ScanInfo describes what Scan read.
type ScanInfo struct {
	// FirstSeq and LastSeq bound the range that was read (the resolved
	// FromSeq and ToSeq); LastSeq is 0 for an empty stream.
	FirstSeq, LastSeq uint64
	// ImportedThrough is the stream's import marker
	// (ledger.MetaImportedThrough) when Scan started.
	ImportedThrough uint64
	// Messages is the number of messages passed to fn.
	Messages int
}

// StreamRange returns the stream's first and last sequence and its import
// marker.
func StreamRange(ctx context.Context, js jetstream.JetStream) (first, last, imported uint64, err error) {
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("archive: stream %s: %w", subjects.StreamName, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("archive: stream %s info: %w", subjects.StreamName, err)
	}
	if info.State.Msgs == 0 {
		return info.State.LastSeq + 1, info.State.LastSeq, ledger.ImportedThrough(info.Config.Metadata), nil
	}
	return info.State.FirstSeq, info.State.LastSeq, ledger.ImportedThrough(info.Config.Metadata), nil
}

// Scan reads the LEDGER stream in sequence order with an ordered
// (ephemeral, flow-controlled, self-healing) consumer and calls fn for each
// message in the range and filter of o, from the calling goroutine. It
// stops at the end of the range, when fn returns an error (returned
// as is), or when ctx is done. The Message and its slices are fn's to keep.
func Scan(ctx context.Context, js jetstream.JetStream, o ScanOptions, fn func(*Message) error) (ScanInfo, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	first, last, imported, err := StreamRange(ctx, js)
	if err != nil {
		return ScanInfo{}, err
	}
	info := ScanInfo{ImportedThrough: imported}
	if o.ToSeq > last {
		return info, fmt.Errorf("%w: sequence %d asked for, the log ends at %d", ErrBeyondLog, o.ToSeq, last)
	}
	from, to := max(o.FromSeq, first), last
	if o.ToSeq > 0 {
		to = o.ToSeq
	}
	info.FirstSeq, info.LastSeq = from, to
	if from > to || last == 0 {
		return info, nil
	}
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return info, fmt.Errorf("archive: stream %s: %w", subjects.StreamName, err)
	}
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   from,
		HeadersOnly:   o.HeadersOnly,
	}
	if !o.FromStored.IsZero() {
		// Starting by time skips everything stored before it; combined
		// with FromSeq, the later of the two wins (checked per message).
		t := o.FromStored
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &t
	}
	if o.Filter != "" {
		cfg.FilterSubjects = []string{o.Filter}
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return info, fmt.Errorf("archive: ordered consumer at seq %d: %w", from, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(o.BatchSize))
	if err != nil {
		return info, fmt.Errorf("archive: read from seq %d: %w", from, err)
	}
	defer it.Stop()
	stopCtx := context.AfterFunc(ctx, it.Stop)
	defer stopCtx()
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		return info, nil // nothing matches from the start point
	}
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return info, ctx.Err()
			}
			return info, fmt.Errorf("archive: read after %d messages (range %d..%d): %w", info.Messages, from, to, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return info, fmt.Errorf("archive: message metadata: %w", err)
		}
		seq := md.Sequence.Stream
		if seq > to {
			return info, nil
		}
		if seq >= from {
			hdr := m.Headers()
			var orig string
			if seq <= imported {
				orig = hdr.Get(ledger.HeaderOriginalTime)
			}
			msg := &Message{
				Seq:     seq,
				Time:    ledger.EventTime(seq, imported, orig, md.Timestamp),
				Stored:  md.Timestamp.UTC(),
				Subject: m.Subject(),
				Header:  hdr,
				Data:    m.Data(),
			}
			info.Messages++
			if err := fn(msg); err != nil {
				return info, err
			}
		}
		if seq >= to || md.NumPending == 0 {
			return info, nil
		}
	}
}
