package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"

	"github.com/mewledger/ledger/api"
)

// AppendOptions are the options of an append, set by its AppendOption
// arguments (WithSpace, WithKernel).
type AppendOptions struct {
	// Space overrides the client's space (WithSpace).
	Space string
	// Kernel takes every body (or line) as a bare kernel proposal (a
	// Proposal or KernelRequest object) for the ledger to wrap in its
	// kernel/proposal envelope; refusals then carry the V-PROP rule id
	// (WithKernel).
	Kernel bool
}

// applyAppend makes an AppendOptions value an option of its own: its
// non-zero fields set those of the append.
func (a AppendOptions) applyAppend(o *AppendOptions) {
	if a.Space != "" {
		o.Space = a.Space
	}
	if a.Kernel {
		o.Kernel = true
	}
}

type kernelOption struct{}

func (kernelOption) applyAppend(o *AppendOptions) { o.Kernel = true }

// WithKernel takes every body (or line) of an append as a bare kernel
// proposal (AppendOptions.Kernel).
func WithKernel() AppendOption { return kernelOption{} }

func (c *Client) appendValues(opts []AppendOption) url.Values {
	var o *AppendOptions
	if len(opts) > 0 {
		o = &AppendOptions{}
		for _, opt := range opts {
			if opt != nil {
				opt.applyAppend(o)
			}
		}
	}
	var space string
	if o != nil {
		space = o.Space
	}
	q := c.spaceValues(space)
	if o != nil && o.Kernel {
		q.Set("kernel", "1")
	}
	return q
}

// Append stores one envelope (any dialect the ledger reads) and returns
// its acknowledgement once the ledger has stored it durably. A refusal is
// an *api.Error matching api.ErrRefused; api.ErrUnavailable means the ledger
// could not confirm the append, and sending the same envelope again is safe.
// The answer's ID, Seq (the stream sequence it is stored at: pass it as
// WithMinSeq to read your own write) and Duplicate (a retry of an envelope
// already stored; Seq is then where the first one is) are set.
func (c *Client) Append(ctx context.Context, envelope []byte, opts ...AppendOption) (api.AppendResult, error) {
	var a api.AppendResult
	err := c.do(ctx, c.opts.HTTP, http.MethodPost, "/v1/events", c.appendValues(opts), bytes.NewReader(envelope), "application/json", &a)
	return a, err
}

// AppendMany stores envelopes in one request and returns one answer per
// envelope, in order: its ack, or the *api.Error refusing it in Error
// (Error.Line is the line number, from 1). The ledger commits concurrent and bulk appends
// together, so this is the fast way to load many. A refused envelope does
// not stop the others. The error is for the request as a whole.
func (c *Client) AppendMany(ctx context.Context, envelopes [][]byte, opts ...AppendOption) ([]api.AppendResult, error) {
	var body bytes.Buffer
	for _, e := range envelopes {
		body.Write(bytes.TrimRight(e, "\r\n"))
		body.WriteByte('\n')
	}
	out := make([]api.AppendResult, 0, len(envelopes))
	err := c.AppendStream(ctx, &body, func(r api.AppendResult) error {
		out = append(out, r)
		return nil
	}, opts...)
	return out, err
}

// AppendStream sends r, JSON lines of envelopes, as one streamed request
// and calls fn with each line's answer as the ledger answers it, in input
// order, while the rest is still being sent: memory stays bounded however
// much r holds. Blank lines are counted in line numbers but get no
// result. fn returning an error stops the call with that error (lines
// already sent may still be stored). ctx alone bounds the call.
func (c *Client) AppendStream(ctx context.Context, r io.Reader, fn func(api.AppendResult) error, opts ...AppendOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err)
	}()
	resp, err := c.send(ctx, c.streaming(), http.MethodPost, "/v1/events", c.appendValues(opts), pr, "application/x-ndjson")
	if err != nil {
		pr.CloseWithError(err)
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		res, ok := parseAckLine(line)
		if !ok {
			res = api.AppendResult{}
			if err := json.Unmarshal(line, &res); err != nil {
				pr.CloseWithError(err)
				return fmt.Errorf("client: NDJSON answer %d: %w", n, err)
			}
			if res.Error != nil {
				res.Error.Status, res.Error.Line = http.StatusBadRequest, res.Line
				if res.Error.Code == api.CodeUnavailable {
					res.Error.Status = http.StatusServiceUnavailable
				}
			}
		}
		if err := fn(res); err != nil {
			pr.CloseWithError(err)
			return err
		}
	}
	if err := sc.Err(); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("client: reading the NDJSON answer: %w", err)
	}
	return nil
}

// parseAckLine reads the answer the ledger writes for every stored line,
// {"line":N,"id":"ID","seq":N,"duplicate":B}, exactly in that form (an id
// without escapes, fields in that order, no white space), without
// reflection; ok is false for anything else (a refusal, another layout),
// which json.Unmarshal then reads. It accepts only what json.Unmarshal
// would read the same way.
func parseAckLine(b []byte) (r api.AppendResult, ok bool) {
	rest, ok := cutPrefix(b, `{"line":`)
	if !ok {
		return r, false
	}
	line, rest, ok := cutUint(rest)
	if !ok || line > 1<<53 {
		return r, false
	}
	if rest, ok = cutPrefix(rest, `,"id":"`); !ok {
		return r, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return r, false
	}
	id := rest[:end]
	for _, c := range id {
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return r, false // escapes or non-ASCII: json.Unmarshal's job
		}
	}
	if rest, ok = cutPrefix(rest[end+1:], `,"seq":`); !ok {
		return r, false
	}
	seq, rest, ok := cutUint(rest)
	if !ok {
		return r, false
	}
	var dup bool
	switch string(rest) {
	case `,"duplicate":false}`:
	case `,"duplicate":true}`:
		dup = true
	default:
		return r, false
	}
	return api.AppendResult{Line: int(line), ID: string(id), Seq: seq, Duplicate: dup}, true
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// cutUint reads a JSON unsigned integer (no sign, fraction, exponent or
// leading zero) that fits in a uint64.
func cutUint(b []byte) (uint64, []byte, bool) {
	i := 0
	var v uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, b, false
		}
		v = v*10 + d
		i++
	}
	if i == 0 || (i > 1 && b[0] == '0') {
		return 0, b, false
	}
	return v, b[i:], true
}
