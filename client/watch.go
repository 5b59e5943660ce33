package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
)

// Gaps returns a page of the recording gaps of the bridges of a space,
// oldest first, starting at cursor ("" for the first page).
func (c *Client) Gaps(ctx context.Context, cursor string, opts ...ReadOption) (*api.Gaps, error) {
	q := c.readValues(opts)
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p api.Gaps
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/gaps", q, nil, "", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DefaultWatchRetry is the pause before a watch reconnects.
const DefaultWatchRetry = 2 * time.Second

// WatchOptions select the changes of a watch.
type WatchOptions struct {
	// Space overrides the client's space.
	Space string
	// Proposal, if set, watches one proposal; State only changes into
	// that state.
	Proposal, State string
	// SinceSeq starts after this sequence: pass the Seq of the last change
	// you received to resume without missing one. 0 starts with the
	// changes folded from now on, unless FromStart is set (the whole
	// change index, from sequence 1).
	SinceSeq  uint64
	FromStart bool
	// Retry is the pause before reconnecting after the stream ends.
	// Default DefaultWatchRetry.
	Retry time.Duration
	// OnHoles, if set, gets each change of a MEW space's holes (`event:
	// holes`: a hole opened, or was healed), in stream order with the
	// proposals' changes, each with its raw JSON; its error ends the
	// watch like fn's. The server sends them to a watch that follows
	// neither one proposal nor one state. Without OnHoles they are
	// skipped.
	OnHoles func(hc api.HoleChange, raw []byte) error
}

// WatchFunc streams the changes of proposals' states and anomalies to fn,
// in stream order, each with its raw JSON, until ctx ends (then it returns
// nil) or fn returns an error (returned as is). A stream that ends (a
// server restart, a dropped slow client) is reopened after Retry with
// Last-Event-ID, so nothing is missed. An error answer of the ledger (a
// bad filter, a missing token) is returned as *Error, and a first
// connection that finds no ledger as an error wrapping ErrUnreachable.
// ctx alone bounds it.
func (c *Client) WatchFunc(ctx context.Context, o WatchOptions, fn func(ch api.Change, raw []byte) error) error {
	if o.Retry <= 0 {
		o.Retry = DefaultWatchRetry
	}
	q := url.Values{}
	space := c.opts.Space
	if o.Space != "" {
		space = o.Space
	}
	for k, v := range map[string]string{"space": space, "proposal": o.Proposal, "state": o.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	last := ""
	if o.SinceSeq > 0 || o.FromStart {
		last = strconv.FormatUint(o.SinceSeq, 10)
	}
	hc := c.streaming()
	for attempt := 0; ; attempt++ {
		err := c.watchOnce(ctx, hc, q, &last, fn, o.OnHoles)
		if ctx.Err() != nil {
			return nil
		}
		if attempt == 0 && errors.Is(err, ErrUnreachable) {
			return err // never connected: no ledger there
		}
		var le *api.Error
		if errors.As(err, &le) {
			return le
		}
		var ce callbackError
		if errors.As(err, &ce) {
			return ce.err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Retry):
		}
	}
}

// Watch is WatchFunc as an iterator: the loop gets each change, and ends
// when ctx ends, when the caller breaks out, or after an error is yielded.
func (c *Client) Watch(ctx context.Context, o WatchOptions) iter.Seq2[api.Change, error] {
	return func(yield func(api.Change, error) bool) {
		stopped := errors.New("stopped")
		err := c.WatchFunc(ctx, o, func(ch api.Change, _ []byte) error {
			if !yield(ch, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && err != stopped {
			yield(api.Change{}, err)
		}
	}
}

// callbackError carries the error of WatchFunc's callback out of a stream.
type callbackError struct{ err error }

func (c callbackError) Error() string { return c.err.Error() }

func (c *Client) watchOnce(ctx context.Context, hc *http.Client, q url.Values, last *string, fn func(api.Change, []byte) error, onHoles func(api.HoleChange, []byte) error) error {
	u := c.opts.API + "/v1/watch"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("client: watch: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isUnreachable(err) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.opts.API, err)
		}
		return fmt.Errorf("client: watch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return errorFrom(resp.StatusCode, data, c.opts.API)
	}
	if err := readSSEHoles(resp.Body, last, fn, onHoles); err != nil {
		return err
	}
	return io.EOF
}

// readSSE reads Server-Sent Events from r: each message with data is a
// change for fn (its raw JSON with it); an id field, with or without data,
// moves *last (after fn: a change it did not take is sent again). It
// returns nil at the end of r, a callbackError from fn, or the error of a
// malformed change or of reading.
func readSSE(r io.Reader, last *string, fn func(api.Change, []byte) error) error {
	return readSSEHoles(r, last, fn, nil)
}

// readSSEHoles is readSSE that gives the messages of `event: holes` to
// onHoles (nil: skipped).
func readSSEHoles(r io.Reader, last *string, fn func(api.Change, []byte) error, onHoles func(api.HoleChange, []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data []string
	id, hasID, event := "", false, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && event == "holes":
			if len(data) > 0 && onHoles != nil {
				raw := []byte(strings.Join(data, "\n"))
				var hc api.HoleChange
				if err := json.Unmarshal(raw, &hc); err != nil {
					return fmt.Errorf("client: watch: bad hole change %.200q: %w", raw, err)
				}
				if err := onHoles(hc, raw); err != nil {
					return callbackError{err}
				}
			}
			if hasID {
				*last = id
			}
			data, id, hasID, event = data[:0], "", false, ""
		case line == "":
			if len(data) > 0 {
				raw := []byte(strings.Join(data, "\n"))
				var ch api.Change
				if err := json.Unmarshal(raw, &ch); err != nil {
					return fmt.Errorf("client: watch: bad change %.200q: %w", raw, err)
				}
				if err := fn(ch, raw); err != nil {
					return callbackError{err}
				}
			}
			if hasID {
				*last = id
			}
			data, id, hasID, event = data[:0], "", false, ""
		case strings.HasPrefix(line, ":"):
		default:
			field, val, _ := strings.Cut(line, ":")
			val = strings.TrimPrefix(val, " ")
			switch field {
			case "data":
				data = append(data, val)
			case "id":
				id, hasID = val, true
			case "event":
				event = val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: watch: %w", err)
	}
	return nil
}
