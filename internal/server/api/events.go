package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/ndjson"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// NDJSON media types: one envelope per line. Any other Content-Type is
// one envelope. (Served by package app, a body that is neither JSON nor
// NDJSON is refused 415 before it gets here: package origin.)
var ndjsonTypes = map[string]bool{
	"application/x-ndjson":   true,
	"application/ndjson":     true,
	"application/jsonl":      true,
	"application/x-jsonl":    true,
	"application/json-lines": true,
}

// IsNDJSON reports whether a Content-Type header value names NDJSON.
func IsNDJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && ndjsonTypes[mt]
}

// paramKernel (?kernel=1) takes every body (or NDJSON line) as a bare
// kernel submission.
const paramKernel = "kernel"

func (a *API) postEvents(w http.ResponseWriter, r *http.Request) {
	if a.storageFull(w) {
		return
	}
	q := r.URL.Query()
	if e := params(q, paramSpace, paramKernel); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	kernel := false
	if v := q.Get(paramKernel); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, badParam(paramKernel, "kernel must be 1 (or true) or 0 (or false), not %q", v))
			return
		}
		kernel = b
	}
	if !a.checkAppendMark(w, r, r.Header.Get(ledger.HeaderBridge)) {
		return
	}
	// An invalid space is refused by the Appender with field "space", as
	// on every other path; only "no space" means the default.
	space, e := spaceParam(q, a.opts.Space)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if IsNDJSON(r.Header.Get("Content-Type")) {
		a.postNDJSON(w, r, space, kernel)
		return
	}
	a.postOne(w, r, space, kernel)
}

func (a *API) tooLarge(w http.ResponseWriter, limit int64, what string) {
	writeError(w, http.StatusRequestEntityTooLarge, &api.Error{Code: api.CodeOversize,
		Message: fmt.Sprintf("%s is over the limit of %d bytes", what, limit)})
}

// postOne appends a single envelope: 202, 400 (refused), 413 (oversize) or
// 503 (not acknowledged; retrying is safe).
func (a *API) postOne(w http.ResponseWriter, r *http.Request, space string, kernel bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		a.opts.Metrics.Refused(metrics.PathHTTP, api.CodeOversize)
		a.tooLarge(w, a.opts.MaxBodyBytes, "the envelope")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadRequest, Message: "reading the body: " + err.Error()})
		return
	}
	var res ledger.Result
	wctx, cancel := a.storageCtx(r.Context())
	defer cancel()
	pd, err := a.opts.Appender.SubmitBody(wctx, space, body, ledger.BodyOptions{Kernel: kernel, Bridge: r.Header.Get(ledger.HeaderBridge)})
	if err != nil {
		res.Err = err
	} else {
		res, err = pd.Result(wctx)
	}
	out := ledger.WireResult(res)
	a.count(metrics.PathHTTP, res)
	switch {
	case err != nil && wctx.Err() != nil && r.Context().Err() == nil && a.storageFull(w):
		// The disk filled while this append waited: not acknowledged
		// (retrying is safe), and said so at once.
	case err == nil:
		writeJSON(w, http.StatusAccepted, out)
	case out.Error.Code == api.CodeOversize:
		writeError(w, http.StatusRequestEntityTooLarge, out.Error)
	case errors.Is(err, ledger.ErrRefused):
		writeError(w, http.StatusBadRequest, out.Error)
	case errors.Is(err, ledger.ErrPublish):
		a.log.Warn().Err(err).Msg("append not acknowledged")
		writeError(w, http.StatusServiceUnavailable, out.Error)
	default:
		a.internal(w, r, err)
	}
}

// count records the outcome of one append in the metrics.
func (a *API) count(path string, res ledger.Result) {
	switch r, refused := ledger.AsRefusal(res.Err); {
	case res.Err == nil:
		a.opts.Metrics.Appended(path, res.Duplicate)
	case refused:
		a.opts.Metrics.Refused(path, r.Code)
	default:
		a.opts.Metrics.AppendError(path)
	}
}

const (
	// ndjsonWindow is the most lines of one request read ahead of their
	// answers, and ndjsonWindowBytes the most bytes they hold: with the
	// reader's buffer, what bounds an NDJSON request's memory whatever the
	// body holds (a line is at most MaxBodyBytes; one line over the byte
	// budget still goes, alone). It holds the committer's batches in
	// flight (appendlog.DefaultBatchesInFlight of DefaultMaxBatch): a
	// smaller window would leave one batch in flight and the next ones
	// starved.
	ndjsonWindow      = 4096
	ndjsonWindowBytes = 16 << 20
	// CompactRefusalsAfter is how many refusals an NDJSON answer writes
	// one line each; past them, a run of consecutive lines refused with
	// the same error is answered by one line {"line":first,
	// "last_line":last,"error":{..}}, so that a body of millions of bad
	// lines cannot make an answer of gigabytes (issue 29 item 8).
	CompactRefusalsAfter = 1000
)

// ndjsonEntry is one non-blank line on its way to its answer: a refusal
// or a pending append.
type ndjsonEntry struct {
	no      int
	size    int64
	refusal *api.Error
	pending *appendlog.Pending
}

// postNDJSON appends one envelope per non-blank line and answers 200 with
// one result per line, in order (blank lines are skipped; line numbers
// count them). It streams: lines are read, appended through the group
// commit and answered as their acknowledgements come back, with at most
// ndjsonWindow lines (ndjsonWindowBytes) of the request in memory. Every
// line costs one write of the client's rate budget (the request itself
// paid for the first). Past CompactRefusalsAfter refusals, a run of lines
// refused with the same error is answered by one line with "last_line".
// A body of unknown length (chunked) that turns out
// over MaxBatchBytes is 413 when nothing was read yet; later, the lines read are appended and answered and a last
// line {"line":N,"error":{"code":"oversize",..}} says where reading
// stopped. A body whose Content-Length is over MaxBatchBytes is 413 at
// once, nothing appended.
func (a *API) postNDJSON(w http.ResponseWriter, r *http.Request, space string, kernel bool) {
	mark := r.Header.Get(ledger.HeaderBridge) // a bridge's session (contract §14), kept on every line's message
	if r.ContentLength > a.opts.MaxBatchBytes {
		a.tooLarge(w, a.opts.MaxBatchBytes, "the NDJSON body")
		return
	}
	ctx := r.Context()
	// The answers stop waiting for acknowledgements when the disk fills.
	wctx, cancelWait := a.storageCtx(ctx)
	defer cancelWait()
	// Answer while the body is still being read (HTTP/1.1 full duplex).
	_ = http.NewResponseController(w).EnableFullDuplex()

	entries := make(chan ndjsonEntry, ndjsonWindow)
	budget := make(chan struct{}, 1) // signalled when bytes are released
	var (
		mu       sync.Mutex
		inFlight int64
		started  bool // the 200 header is written
	)
	release := func(n int64) {
		mu.Lock()
		inFlight -= n
		mu.Unlock()
		select {
		case budget <- struct{}{}:
		default:
		}
	}
	reserve := func(n int64) error {
		for {
			mu.Lock()
			if inFlight == 0 || inFlight+n <= ndjsonWindowBytes {
				inFlight += n
				mu.Unlock()
				return nil
			}
			mu.Unlock()
			select {
			case <-budget:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}

	bw := bufio.NewWriterSize(w, 32<<10)
	var line []byte // the writer's: one answer line
	flusher := http.NewResponseController(w)
	start := func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
	}
	write := func(res api.AppendResult) {
		line = res.AppendNDJSON(line[:0])
		_, _ = bw.Write(line)
	}
	// The writer answers the entries in order, flushing whenever it has
	// caught up with the reader; past CompactRefusalsAfter refusals, a
	// run of identical ones is held in run and answered by one line.
	written := make(chan struct{})
	go func() {
		defer close(written)
		refused := 0
		var run *api.AppendResult
		endRun := func() {
			if run != nil {
				if run.LastLine == run.Line {
					run.LastLine = 0
				}
				write(*run)
				run = nil
			}
		}
		for e := range entries {
			start()
			if e.refusal != nil {
				if e.refusal.Code != api.CodeBadRequest {
					a.opts.Metrics.Refused(metrics.PathHTTPNDJSON, e.refusal.Code)
				}
				refused++
				switch {
				case refused <= CompactRefusalsAfter:
					write(api.AppendResult{Line: e.no, Error: e.refusal})
				case run != nil && *run.Error == *e.refusal:
					run.LastLine = e.no
				default:
					endRun()
					run = &api.AppendResult{Line: e.no, LastLine: e.no, Error: e.refusal}
				}
			} else {
				endRun()
				res, _ := e.pending.Result(wctx)
				a.count(metrics.PathHTTPNDJSON, res)
				out := ledger.WireResult(res)
				out.Line = e.no
				write(out)
			}
			release(e.size)
			if len(entries) == 0 {
				_ = bw.Flush()
				_ = flusher.Flush()
			}
		}
		endRun()
		_ = bw.Flush()
	}()

	first, lastNo := true, 0
	maxLine := a.opts.MaxBodyBytes
	err := ndjson.Split(http.MaxBytesReader(w, r.Body, a.opts.MaxBatchBytes), int(maxLine), func(l ndjson.Line) error {
		lastNo = l.No
		e := ndjsonEntry{no: l.No, size: int64(len(l.Data))}
		if err := reserve(e.size); err != nil {
			return err
		}
		if !first { // the request paid for its first envelope
			if err := httpauth.WaitWrites(ctx, 1); err != nil {
				release(e.size)
				return err
			}
		}
		first = false
		if l.Oversize() {
			e.refusal = &api.Error{Code: api.CodeOversize,
				Message: fmt.Sprintf("envelope is %d bytes, over the limit of %d", l.Size, maxLine)}
		} else if pd, err := a.opts.Appender.SubmitBody(ctx, space, l.Data, ledger.BodyOptions{Kernel: kernel, Bridge: mark}); err != nil {
			e.refusal = ledger.WireError(err)
		} else {
			e.pending = pd
		}
		entries <- e
		return nil
	})
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &mbe):
		mu.Lock()
		nothing := !started && lastNo == 0
		mu.Unlock()
		if nothing {
			close(entries)
			<-written
			a.tooLarge(w, a.opts.MaxBatchBytes, "the NDJSON body")
			return
		}
		entries <- ndjsonEntry{no: lastNo + 1, refusal: &api.Error{Code: api.CodeOversize,
			Message: fmt.Sprintf("the NDJSON body is over the limit of %d bytes: reading stopped here; the lines before were appended", a.opts.MaxBatchBytes)}}
	case ctx.Err() != nil:
		// The client is gone: nobody to answer.
	default:
		entries <- ndjsonEntry{no: lastNo + 1, refusal: &api.Error{Code: api.CodeBadRequest, Message: "reading the body: " + err.Error()}}
	}
	close(entries)
	<-written
	start() // an empty body: 200 with no lines
}
