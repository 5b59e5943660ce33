package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// HeaderOriginalMsgID keeps, on an imported message, the Nats-Msg-Id the
// message had when it was first appended (ledger.HeaderOriginalMsgID).
const HeaderOriginalMsgID = ledger.HeaderOriginalMsgID

// ImportMsgIDPrefix starts the Nats-Msg-Id of every imported message.
const ImportMsgIDPrefix = "import/"

// Defaults of ImportOptions.
const (
	DefaultImportBatch   = 500
	DefaultImportRetries = 4
	DefaultAckTimeout    = 10 * time.Second
)

// Import errors (wrapped, with the details that matter).
var (
	// ErrRefused: the file does not verify; nothing was written. The
	// error also wraps the *LineError naming the first bad line.
	ErrRefused = errors.New("archive: import refused")
	// ErrNotEmpty: the stream holds messages and Append was not set.
	ErrNotEmpty = errors.New("archive: stream is not empty")
	// ErrNotReproducible: into an empty stream without Append, the file
	// must start at seq 1 and be contiguous so that every message gets
	// its original sequence.
	ErrNotReproducible = errors.New("archive: sequences cannot be reproduced")
	// ErrActiveConsumers: a consumer is reading the stream (a running
	// projector would fold the imported messages before the import marker
	// covers them, with the wrong times).
	ErrActiveConsumers = errors.New("archive: the stream has active consumers")
	// ErrForeignTime: Append would extend the import marker over an
	// existing message that carries ledger.HeaderOriginalTime, and so
	// change the time the fold gives it.
	ErrForeignTime = errors.New("archive: existing message carries an original-time header")
	// ErrConcurrentWrite: another writer appended to the stream during
	// the import; the import stops at the last message it wrote.
	ErrConcurrentWrite = errors.New("archive: concurrent write to the stream")
	// ErrChanged: the file changed between verification and import.
	ErrChanged = errors.New("archive: file changed during import")
)

// ImportOptions configures Import.
type ImportOptions struct {
	// Append allows importing into a non-empty stream: the messages are
	// appended after the existing ones, with sequences offset by the same
	// amount (for a contiguous file).
	Append bool
	// AllowActiveConsumers skips the active-consumer check.
	AllowActiveConsumers bool
	// BatchSize is the number of messages published before each update of
	// the import marker (and the publish window). Default
	// DefaultImportBatch.
	BatchSize int
	// MaxRetries bounds retries after transient publish failures
	// (appendlog.IsTransient). Default DefaultImportRetries; negative: none.
	MaxRetries int
	// AckTimeout bounds the wait for each acknowledgement. Default
	// DefaultAckTimeout.
	AckTimeout time.Duration
	// TempDir is where a non-seekable input (a pipe) is spooled while it
	// is verified; default os.TempDir().
	TempDir string
	// Progress, if set, is called after each batch with the messages
	// imported and the number in the file.
	Progress func(done, total uint64)
}

func (o *ImportOptions) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultImportBatch
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultImportRetries
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
}

// ImportResult describes an import (also the part done before an error).
type ImportResult struct {
	// File is the verified file's summary.
	File Summary `json:"file"`
	// Imported is the number of messages written.
	Imported int `json:"imported"`
	// FirstSeq and LastSeq are the stream sequences written.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Offset is stream sequence minus file sequence (0 when sequences were
	// reproduced; constant for a contiguous file).
	Offset int64 `json:"offset"`
}

// Import writes an export into the LEDGER stream (which must exist:
// appendlog.EnsureStream) so that folding the stream gives the projection the
// original gave.
//
// Before writing anything it verifies the whole file (reading it twice;
// a non-seekable r is spooled to a temporary file) and refuses, wrapping
// ErrRefused and the *LineError of the first bad line. It refuses a
// non-empty stream unless o.Append (ErrNotEmpty); into an empty stream
// without Append the file must start at seq 1 and be contiguous
// (ErrNotReproducible). It refuses while a consumer of the stream has
// pull requests waiting or a push subscriber (ErrActiveConsumers): import
// into a ledger whose `serve` is stopped. With Append, it refuses when an
// existing message above the import marker carries
// ledger.HeaderOriginalTime (ErrForeignTime).
//
// Each line is republished to its subject with its headers except the
// server-interpreted Nats-* ones, plus ledger.HeaderOriginalTime = the
// line's time and HeaderOriginalMsgID = its original Nats-Msg-Id (unless
// already set by an earlier import). Why not the original Nats-Msg-Id: a
// log legitimately holds the same Msg-Id twice (a retry after the
// duplicate window; the fold flags it), and republishing both within the
// window would make JetStream drop the second and change the projection.
// The import's Msg-Id, "import/<seq>/<line hash>", is unique per line and
// per file (the hash chains everything before it), and stable, so that a
// retried publish is stored once; and it never collides with the ids of
// live appends (<space>/<id>/<digest>). A second import of the same file
// within the duplicate window is answered as a duplicate, which Import
// reports as an error rather than skipping.
//
// Every publish expects the stream's last sequence to be the one before
// it and, after the first, the stream's last Msg-Id to be the previous
// line's: sequences are reproduced exactly (or offset by a constant with
// Append), and any message from another writer makes the import fail
// (ErrConcurrentWrite) instead of being interleaved. Publishes are
// pipelined in batches; after each batch, the stream metadata
// ledger.MetaImportedThrough is raised (UpdateStream, keeping the rest of
// the configuration) to the last sequence written, so it never covers a
// message the import did not write, and the fold reads each imported
// message's original time. After a failure, Import finds what the stream
// actually holds, sets the marker to it, and retries transient failures
// from there.
func Import(ctx context.Context, js jetstream.JetStream, r io.Reader, o ImportOptions) (ImportResult, error) {
	o.defaults()
	var res ImportResult
	in, cleanup, err := seekable(r, o.TempDir)
	if err != nil {
		return res, err
	}
	defer cleanup()
	start, err := in.Seek(0, io.SeekCurrent)
	if err != nil {
		return res, fmt.Errorf("archive: import: %w", err)
	}
	sum, err := VerifyChain(in)
	res.File = sum
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if sum.Lines == 0 {
		return res, nil
	}
	if _, err := in.Seek(start, io.SeekStart); err != nil {
		return res, fmt.Errorf("archive: import: rewind: %w", err)
	}

	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return res, fmt.Errorf("archive: import: stream %s: %w", subjects.StreamName, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("archive: import: stream info: %w", err)
	}
	last := info.State.LastSeq
	empty := info.State.Msgs == 0 && last == 0
	switch {
	case !empty && !o.Append:
		return res, fmt.Errorf("%w: it holds %d messages up to seq %d; import with --append to add after them", ErrNotEmpty, info.State.Msgs, last)
	case empty && !o.Append && sum.FirstSeq != 1:
		return res, fmt.Errorf("%w: the file starts at seq %d, not 1; import with --append to write it from seq 1", ErrNotReproducible, sum.FirstSeq)
	case empty && !o.Append && !sum.Contiguous:
		return res, fmt.Errorf("%w: the file's sequences %d..%d have gaps (%d lines); import with --append to write them contiguously", ErrNotReproducible, sum.FirstSeq, sum.LastSeq, sum.Lines)
	}
	if !o.AllowActiveConsumers {
		if err := checkConsumers(ctx, stream); err != nil {
			return res, err
		}
	}
	marker := ledger.ImportedThrough(info.Config.Metadata)
	if o.Append && last > marker {
		if err := checkNoOriginalTimes(ctx, js, marker+1, last); err != nil {
			return res, err
		}
	}

	im := &importer{js: js, o: o, res: &res, last: last, total: uint64(sum.Lines)}
	if im.pub, err = jetstream.New(js.Conn(),
		jetstream.WithPublishAsyncMaxPending(o.BatchSize),
		jetstream.WithPublishAsyncTimeout(o.AckTimeout)); err != nil {
		return res, fmt.Errorf("archive: import: %w", err)
	}
	defer im.pub.CleanupPublisher()
	if o.Progress != nil {
		o.Progress(0, im.total)
	}
	cr := NewChainReader(in)
	batch := make([]*Record, 0, o.BatchSize)
	for {
		rec, err := cr.Next()
		if err != nil && !errors.Is(err, io.EOF) {
			return res, fmt.Errorf("%w: %w", ErrChanged, err)
		}
		if rec != nil {
			batch = append(batch, rec)
		}
		if len(batch) == o.BatchSize || (errors.Is(err, io.EOF) && len(batch) > 0) {
			if perr := im.publishBatch(ctx, batch); perr != nil {
				return res, perr
			}
			batch = batch[:0]
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if cr.Summary().Head != sum.Head {
		return res, fmt.Errorf("%w: head %s verified, %s imported", ErrChanged, sum.Head, cr.Summary().Head)
	}
	return res, nil
}

// importer is the state of one Import's writing phase.
type importer struct {
	js     jetstream.JetStream
	pub    jetstream.JetStream // own handle: the async window is the import's
	o      ImportOptions
	res    *ImportResult
	last   uint64 // the stream's last sequence, as far as the import knows
	prevID string // Msg-Id of the last message written, "" before the first
	total  uint64
}

// msgID is the import's Nats-Msg-Id of a line.
func msgID(r *Record) string { return ImportMsgIDPrefix + strconv.FormatUint(r.Seq, 10) + "/" + r.Hash }

// message builds the message to publish for r: its subject and data, and
// its headers without the server-interpreted Nats-* ones, plus the
// original time and Msg-Id.
func message(r *Record) *nats.Msg {
	h := nats.Header{}
	var origID string
	for k, vs := range r.Headers {
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			if strings.EqualFold(k, jetstream.MsgIDHeader) && len(vs) > 0 {
				origID = vs[0]
			}
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h.Set(ledger.HeaderOriginalTime, r.Time)
	// The message's identity (ledger.MsgIdentity, which the Merkle tree's
	// leaf holds): kept from an earlier import when the line was itself
	// imported (its Nats-Msg-Id is that import's), else its own
	// Nats-Msg-Id, so that the imported log has the original's leaves.
	if !strings.HasPrefix(origID, ImportMsgIDPrefix) || h.Get(HeaderOriginalMsgID) == "" {
		h.Del(HeaderOriginalMsgID)
		if origID != "" {
			h.Set(HeaderOriginalMsgID, origID)
		}
	}
	return &nats.Msg{Subject: r.Subject, Data: r.Raw, Header: h}
}

// publishBatch writes batch after im.last, pipelined, then raises the
// marker. On a failure it reconciles with the stream and retries transient
// failures from the first line not stored.
func (im *importer) publishBatch(ctx context.Context, batch []*Record) error {
	attempt := 0
	for len(batch) > 0 {
		n, perr := im.pipeline(ctx, batch)
		stored := n
		if perr != nil {
			// Find out what the stream really holds before anything else.
			var rerr error
			stored, rerr = im.reconcile(ctx, batch)
			if rerr != nil {
				// Cover what the import did write, then stop.
				if stored > 0 {
					im.account(batch[:stored])
					rerr = errors.Join(rerr, im.raiseMarker(ctx))
				}
				return errors.Join(perr, rerr)
			}
		}
		if stored > 0 {
			im.account(batch[:stored])
			if err := im.raiseMarker(ctx); err != nil {
				return err
			}
		}
		if im.o.Progress != nil {
			im.o.Progress(uint64(im.res.Imported), im.total)
		}
		batch = batch[stored:]
		if perr == nil {
			continue
		}
		attempt++
		if len(batch) == 0 {
			continue // the failure was only a lost acknowledgement
		}
		if !appendlog.IsTransient(perr) || attempt > im.o.MaxRetries || ctx.Err() != nil {
			return perr
		}
		t := time.NewTimer(time.Duration(attempt) * 200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %w)", ctx.Err(), perr)
		case <-t.C:
		}
	}
	return nil
}

// account records lines as written at im.last+1...
func (im *importer) account(recs []*Record) {
	for _, r := range recs {
		im.last++
		if im.res.Imported == 0 {
			im.res.FirstSeq = im.last
			im.res.Offset = int64(im.last) - int64(r.Seq)
		}
		im.res.Imported++
		im.res.LastSeq = im.last
		im.prevID = msgID(r)
	}
}

// pipeline publishes batch asynchronously and waits for every ack. It
// returns how many leading lines were acknowledged at their expected
// sequence, and the first error (naming the line).
func (im *importer) pipeline(ctx context.Context, batch []*Record) (int, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(batch))
	var sendErr error
	prev := im.prevID
	for i, r := range batch {
		opts := []jetstream.PublishOpt{
			jetstream.WithMsgID(msgID(r)),
			jetstream.WithExpectStream(subjects.StreamName),
			jetstream.WithExpectLastSequence(im.last + uint64(i)),
		}
		if prev != "" {
			opts = append(opts, jetstream.WithExpectLastMsgID(prev))
		}
		f, err := im.pub.PublishMsgAsync(message(r), opts...)
		if err != nil {
			sendErr = fmt.Errorf("archive: import seq %d (%s): send: %w", r.Seq, r.Subject, err)
			break
		}
		futs = append(futs, f)
		prev = msgID(r)
	}
	ok, firstErr := 0, error(nil)
	for i, f := range futs {
		r := batch[i]
		want := im.last + uint64(i) + 1
		var err error
		select {
		case ack := <-f.Ok():
			switch {
			case ack.Duplicate:
				err = fmt.Errorf("%w: seq %d was already imported (stored at seq %d within the duplicate window): this file was imported moments ago", ErrConcurrentWrite, r.Seq, ack.Sequence)
			case ack.Sequence != want:
				err = fmt.Errorf("%w: seq %d stored at %d, expected %d", ErrConcurrentWrite, r.Seq, ack.Sequence, want)
			}
		case e := <-f.Err():
			err = e
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("archive: import seq %d (%s) at stream seq %d: %w", r.Seq, r.Subject, want, err)
		}
		if firstErr == nil {
			ok++
		}
	}
	if firstErr == nil {
		firstErr = sendErr
	}
	return ok, firstErr
}

// reconcile reads the end of the stream after a failed pipeline and
// returns how many leading lines of batch it holds. Because every publish
// expected the previous line's Msg-Id, what the import wrote is one run
// right after im.last; a message of another writer after that run makes
// reconcile return the run's length and ErrConcurrentWrite.
func (im *importer) reconcile(ctx context.Context, batch []*Record) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), im.o.AckTimeout)
	defer cancel()
	stream, err := im.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, fmt.Errorf("archive: import: reconcile: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("archive: import: reconcile: %w", err)
	}
	last := info.State.LastSeq
	switch {
	case last == im.last:
		return 0, nil
	case last < im.last:
		return 0, fmt.Errorf("%w: the stream's last sequence went back from %d to %d", ErrConcurrentWrite, im.last, last)
	}
	ours := func(seq uint64) (bool, *jetstream.RawStreamMsg, error) {
		i := seq - im.last - 1
		if i >= uint64(len(batch)) {
			return false, nil, nil
		}
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			return false, nil, fmt.Errorf("archive: import: reconcile: read seq %d: %w", seq, err)
		}
		return m.Header.Get(jetstream.MsgIDHeader) == msgID(batch[i]), m, nil
	}
	// The common case: everything up to the end is the import's.
	ok, _, err := ours(last)
	if err != nil {
		return 0, err
	}
	if ok {
		return int(last - im.last), nil
	}
	n := 0
	for seq := im.last + 1; seq <= last; seq++ {
		ok, m, err := ours(seq)
		if err != nil {
			return n, err
		}
		if !ok {
			subj, id := "", ""
			if m != nil {
				subj, id = m.Subject, m.Header.Get(jetstream.MsgIDHeader)
			}
			return n, fmt.Errorf("%w: stream seq %d (subject %q, Msg-Id %q) was not written by this import, which stopped at seq %d",
				ErrConcurrentWrite, seq, subj, id, seq-1)
		}
		n++
	}
	return n, nil
}

// raiseMarker sets ledger.MetaImportedThrough to im.last, keeping the rest
// of the stream configuration. It never lowers it.
func (im *importer) raiseMarker(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), im.o.AckTimeout)
	defer cancel()
	stream, err := im.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return fmt.Errorf("archive: import: marker: %w", err)
	}
	cfg := stream.CachedInfo().Config
	if ledger.ImportedThrough(cfg.Metadata) >= im.last {
		return nil
	}
	meta := maps.Clone(cfg.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[ledger.MetaImportedThrough] = strconv.FormatUint(im.last, 10)
	cfg.Metadata = meta
	if _, err := im.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("archive: import: set %s to %d: %w", ledger.MetaImportedThrough, im.last, err)
	}
	return nil
}

// checkConsumers refuses when a consumer of the stream is being read.
func checkConsumers(ctx context.Context, stream jetstream.Stream) error {
	lister := stream.ListConsumers(ctx)
	var active []string
	for ci := range lister.Info() {
		if ci.NumWaiting > 0 || ci.PushBound {
			active = append(active, ci.Name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("archive: import: list consumers: %w", err)
	}
	if len(active) > 0 {
		return fmt.Errorf("%w: %s (stop `ledger serve` and other readers before importing)", ErrActiveConsumers, strings.Join(active, ", "))
	}
	return nil
}

// checkNoOriginalTimes refuses when a message in from..to carries
// ledger.HeaderOriginalTime (reading headers only).
func checkNoOriginalTimes(ctx context.Context, js jetstream.JetStream, from, to uint64) error {
	errFound := errors.New("found")
	var bad *Message
	_, err := Scan(ctx, js, ScanOptions{FromSeq: from, ToSeq: to, HeadersOnly: true}, func(m *Message) error {
		if m.Header.Get(ledger.HeaderOriginalTime) != "" {
			bad = m
			return errFound
		}
		return nil
	})
	if bad != nil {
		return fmt.Errorf("%w: seq %d (%s) was appended after the last import with a %s header; appending an import would make the fold honour it",
			ErrForeignTime, bad.Seq, bad.Subject, ledger.HeaderOriginalTime)
	}
	if err != nil {
		return fmt.Errorf("archive: import: scan seq %d..%d: %w", from, to, err)
	}
	return nil
}

// seekable returns r itself when it can seek (a regular file), else a
// temporary spool file holding all of r, removed by cleanup.
func seekable(r io.Reader, dir string) (io.ReadSeeker, func(), error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		if _, err := rs.Seek(0, io.SeekCurrent); err == nil {
			return rs, func() {}, nil
		}
	}
	f, err := os.CreateTemp(dir, "ledger-import-*.jsonl")
	if err != nil {
		return nil, nil, fmt.Errorf("archive: import: spool: %w", err)
	}
	cleanup := func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	if _, err := io.Copy(f, r); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("archive: import: spool to %s: %w", f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("archive: import: spool: %w", err)
	}
	return f, cleanup, nil
}
