package archive

import (
	"context"
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
}

// Export writes the LEDGER stream (or the range of o) to w in the format
// of the package doc, reading it with an ordered consumer, and returns the
// summary of what it wrote (Summary.Head is the hash to keep with the
// file). w is written through a buffer that is flushed before Export
// returns; on error, what was written so far is a valid, shorter chain.
func Export(ctx context.Context, js jetstream.JetStream, w io.Writer, o ExportOptions) (Summary, error) {
	cw := newChainWriter(w)
	first, last, _, err := StreamRange(ctx, js)
	if err != nil {
		return cw.sum, err
	}
	from, to := max(o.FromSeq, first), last
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
	_, err = Scan(ctx, js, ScanOptions{FromSeq: from, ToSeq: to}, func(m *Message) error {
		if err := cw.write(m.Record()); err != nil {
			return err
		}
		if o.Progress != nil {
			o.Progress(uint64(cw.sum.Lines), total)
		}
		return nil
	})
	if ferr := cw.flush(); err == nil {
		err = ferr
	}
	return cw.sum, err
}
