package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/mewledger/ledger/internal/metrics"
	"github.com/mewledger/ledger/internal/ndjson"
	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/ledger"
)

// NDJSON media types: one envelope per line. Any other Content-Type (or
// none, as curl -d sends) is one envelope.
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
	if kernel && a.opts.WrapKernel == nil {
		writeError(w, http.StatusBadRequest, badParam(paramKernel, "this server does not take bare kernel submissions"))
		return
	}
	// An invalid space is refused by the Appender with field "space", as
	// on every other path; only "no space" means the default.
	space := q.Get(paramSpace)
	if space == "" {
		space = a.opts.Space
	}
	if IsNDJSON(r.Header.Get("Content-Type")) {
		a.postNDJSON(w, r, space, kernel)
		return
	}
	a.postOne(w, r, space, kernel)
}

// envelope returns the envelope to append for a body: the body, or the
// envelope a bare kernel submission is wrapped in (when kernel is set, or
// the body is recognised as one). The error is the wrapping's refusal.
func (a *API) envelope(body []byte, kernel bool) ([]byte, error) {
	if a.opts.WrapKernel == nil || (!kernel && !ledger.MaybeBareKernel(body)) {
		return body, nil
	}
	return a.opts.WrapKernel(body)
}

func (a *API) tooLarge(w http.ResponseWriter, limit int64, what string) {
	writeError(w, http.StatusRequestEntityTooLarge, &wire.Error{Code: ledger.CodeOversize,
		Message: fmt.Sprintf("%s is over the limit of %d bytes", what, limit)})
}

// postOne appends a single envelope: 202, 400 (refused), 413 (oversize) or
// 503 (not acknowledged; retrying is safe).
func (a *API) postOne(w http.ResponseWriter, r *http.Request, space string, kernel bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		a.opts.Metrics.Refused(metrics.PathHTTP, ledger.CodeOversize)
		a.tooLarge(w, a.opts.MaxBodyBytes, "the envelope")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, &wire.Error{Code: wire.CodeBadRequest, Message: "reading the body: " + err.Error()})
		return
	}
	var res ledger.Result
	env, err := a.envelope(body, kernel)
	if err != nil {
		res.Err = err
	} else {
		res, err = a.opts.Appender.Append(r.Context(), space, env)
	}
	out := wire.FromResult(res)
	a.count(metrics.PathHTTP, res)
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, out)
	case out.Error.Code == ledger.CodeOversize:
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

// line is one non-blank input line of an NDJSON body.
type line struct {
	no      int
	data    []byte
	refusal *wire.Error // set for a line over the envelope limit
}

// readLines splits an NDJSON body into its non-blank lines (package
// ndjson). It returns the reader's error: a *http.MaxBytesError when the
// body is too big.
func readLines(rd io.Reader, maxLine int64) ([]line, error) {
	var out []line
	err := ndjson.Split(rd, int(maxLine), func(l ndjson.Line) error {
		nl := line{no: l.No, data: l.Data}
		if l.Oversize() {
			nl.refusal = &wire.Error{Code: ledger.CodeOversize,
				Message: fmt.Sprintf("envelope is %d bytes, over the limit of %d", l.Size, maxLine)}
		}
		out = append(out, nl)
		return nil
	})
	return out, err
}

// postNDJSON appends one envelope per non-blank line and answers 200 with
// one result per line, in order (blank lines are skipped; line numbers
// count them). A body over MaxBatchBytes is 413 and nothing is appended.
func (a *API) postNDJSON(w http.ResponseWriter, r *http.Request, space string, kernel bool) {
	lines, err := readLines(http.MaxBytesReader(w, r.Body, a.opts.MaxBatchBytes), a.opts.MaxBodyBytes)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		a.tooLarge(w, a.opts.MaxBatchBytes, "the NDJSON body")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, &wire.Error{Code: wire.CodeBadRequest, Message: "reading the body: " + err.Error()})
		return
	}
	for i := range lines {
		if lines[i].refusal != nil {
			continue
		}
		env, err := a.envelope(lines[i].data, kernel)
		if err != nil {
			lines[i].refusal = wire.FromError(err)
			continue
		}
		lines[i].data = env
	}
	raws := make([][]byte, 0, len(lines))
	idx := make([]int, 0, len(lines)) // raws[i] is lines[idx[i]]
	for i, l := range lines {
		if l.refusal == nil {
			raws = append(raws, l.data)
			idx = append(idx, i)
		}
	}
	results := make([]wire.AppendResult, len(lines))
	for i, l := range lines {
		if l.refusal != nil {
			a.opts.Metrics.Refused(metrics.PathHTTPNDJSON, l.refusal.Code)
			results[i] = wire.AppendResult{Line: l.no, Error: l.refusal}
		}
	}
	for j, res := range a.opts.Appender.AppendMany(r.Context(), space, raws) {
		a.count(metrics.PathHTTPNDJSON, res)
		out := wire.FromResult(res)
		out.Line = lines[idx[j]].no
		results[idx[j]] = out
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := newEncoder(bw)
	for _, res := range results {
		_ = enc.Encode(res)
	}
	_ = bw.Flush()
}
