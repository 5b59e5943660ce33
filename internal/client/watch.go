package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/projections"
)

// WatchOptions are the filters of GET /v1/watch.
type WatchOptions struct {
	Space, Proposal, State string
	// SinceSeq, when set, starts after that sequence; nil starts at the
	// projection's checkpoint (changes from now on).
	SinceSeq *uint64
	// Retry is the pause before reconnecting after the stream ends.
	// Default 2s.
	Retry time.Duration
}

// Watch streams the changes of GET /v1/watch to fn, with each change's raw
// JSON, until ctx is done (then it returns nil) or fn returns an error. A
// stream that ends (a server restart, a dropped slow client) is reopened
// after Retry with Last-Event-ID, so nothing is missed; an error answer of
// the API (a bad filter, 401) is returned as *APIError, and so is
// ErrUnreachable when the first connection fails.
func (c *Client) Watch(ctx context.Context, o WatchOptions, fn func(ch projections.Change, raw []byte) error) error {
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
	q := url.Values{}
	for k, v := range map[string]string{"space": o.Space, "proposal": o.Proposal, "state": o.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	last := ""
	if o.SinceSeq != nil {
		last = strconv.FormatUint(*o.SinceSeq, 10)
	}
	hc := c.long()
	for attempt := 0; ; attempt++ {
		err := c.watchOnce(ctx, hc, q, &last, fn)
		if ctx.Err() != nil {
			return nil
		}
		if attempt == 0 && errors.Is(err, ErrUnreachable) {
			return err // never connected: no ledger there
		}
		var ae *APIError
		if errors.As(err, &ae) {
			return ae
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

// callbackError carries the error of Watch's callback out of a stream.
type callbackError struct{ err error }

func (c callbackError) Error() string { return c.err.Error() }

func (c *Client) watchOnce(ctx context.Context, hc *http.Client, q url.Values, last *string, fn func(projections.Change, []byte) error) error {
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
		var eb wire.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		}
		return &APIError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: fmt.Sprintf("unexpected answer from %s (is it a ledger?): %.200s", c.opts.API, data)}
	}
	if err := readSSE(resp.Body, last, fn); err != nil {
		return err
	}
	return io.EOF
}

// readSSE reads Server-Sent Events from r: each message with data is a
// change for fn (its raw JSON with it); an id field, with or without data,
// moves *last. It returns nil at the end of r, a callbackError from fn, or
// the error of a malformed change or of reading.
func readSSE(r io.Reader, last *string, fn func(projections.Change, []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data []string
	id, hasID := "", false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				raw := []byte(strings.Join(data, "\n"))
				var ch projections.Change
				if err := json.Unmarshal(raw, &ch); err != nil {
					return fmt.Errorf("client: watch: bad change %.200q: %w", raw, err)
				}
				if err := fn(ch, raw); err != nil {
					return callbackError{err}
				}
			}
			if hasID { // after fn: a change it did not take is sent again
				*last = id
			}
			data, id, hasID = data[:0], "", false
		case strings.HasPrefix(line, ":"):
		default:
			field, val, _ := strings.Cut(line, ":")
			val = strings.TrimPrefix(val, " ")
			switch field {
			case "data":
				data = append(data, val)
			case "id":
				id, hasID = val, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: watch: %w", err)
	}
	return nil
}
