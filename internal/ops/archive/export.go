package archive

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// ExportOptions configures Export.
type ExportOptions struct {
	// FromSeq and ToSeq bound the export (0: the stream's first and last
	// sequence when Export starts).
	FromSeq, ToSeq uint64
	// Progress, if set, is called after every message with the number of
	// messages written and the number in the range.
	Progress func(done, total uint64)
	// AllowGaps exports a log with missing sequences: each line after a
	// hole names it (Record.MissingBefore) and Summary.Missing lists
	// them. Without it such a log is ErrGaps, naming the first.
	AllowGaps bool
}

// ErrGaps is returned by Export for a log with a missing sequence (contract
// §9: an export never hides a hole) unless ExportOptions.AllowGaps.
var ErrGaps = errors.New("archive: the log has missing sequences")

// Export writes the LEDGER stream (or the range of o) to w in the format
// of the package doc, reading it with an ordered consumer, and returns the
// summary of what it wrote (Summary.Head is the hash to keep with the
// file). w is written through a buffer that is flushed before Export
// returns; on error, what was written so far is a valid, shorter chain.
func Export(ctx context.Context, js jetstream.JetStream, w io.Writer, o ExportOptions) (Summary, error) {
	cw := newChainWriter(w)
	first, last, imported, err := StreamRange(ctx, js)
	if err != nil {
		return cw.sum, err
	}
	from, to := max(o.FromSeq, first), last
	if first > 1 && imported == 0 && o.FromSeq <= 1 && last >= first {
		// The log starts past seq 1 with no import marker: its start
		// is missing (a block file lost, history aged out).
		from = 1
	}
	if o.ToSeq > 0 {
		to = o.ToSeq
	}
	if o.ToSeq > last {
		return cw.sum, fmt.Errorf("%w: export to sequence %d, the log ends at %d", ErrBeyondLog, o.ToSeq, last)
	}
	var total uint64
	if to >= from {
		total = to - from + 1
	}
	if o.Progress != nil {
		o.Progress(0, total)
	}
	next := from
	_, err = Scan(ctx, js, ScanOptions{FromSeq: from, ToSeq: to}, func(m *Message) error {
		rec := m.Record()
		if m.Seq > next {
			gap := SeqRange{next, m.Seq - 1}
			if !o.AllowGaps {
				return fmt.Errorf("%w: %s is missing from the stream (export with --allow-gaps to write the rest, the file naming the hole)", ErrGaps, gap)
			}
			rec.MissingBefore = &gap
		}
		next = m.Seq + 1
		if err := cw.write(rec); err != nil {
			return err
		}
		if o.Progress != nil {
			o.Progress(uint64(cw.sum.Lines), total)
		}
		return nil
	})
	if err == nil && total > 0 && next <= to {
		gap := SeqRange{next, to}
		if !o.AllowGaps {
			err = fmt.Errorf("%w: %s is missing from the stream (export with --allow-gaps to write the rest, the summary naming the hole)", ErrGaps, gap)
		} else {
			cw.sum.Missing = append(cw.sum.Missing, gap)
		}
	}
	if ferr := cw.flush(); err == nil {
		err = ferr
	}
	if cw.sum.Lines > 0 && cw.sum.FirstSeq > from && o.AllowGaps {
		cw.sum.Missing = append([]SeqRange{{from, cw.sum.FirstSeq - 1}}, cw.sum.Missing...)
	}
	return cw.sum, err
}
