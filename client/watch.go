package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mewledger/ledger/projections/model"
)

// Change is one change of a proposal's state or anomalies, as /v1/watch
// streams it.
type Change = model.Change

// Gap is one recording gap of a bridge (GET /v1/gaps).
type Gap = model.Gap

// GapsPage is a page of gaps, oldest first; NextCursor is "" on the last.
type GapsPage struct {
	Gaps       []Gap  `json:"gaps"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Gaps returns a page of the recording gaps of the bridges of a space,
// oldest first, starting at cursor ("" for the first page).
func (c *Client) Gaps(ctx context.Context, cursor string, ro *ReadOptions) (*GapsPage, error) {
	q := c.readValues(ro)
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p GapsPage
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/gaps", q, nil, "", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// WatchOptions select the changes of a watch.
type WatchOptions struct {
	// Space overrides the client's space.
	Space string
	// Proposal, if set, watches one proposal; State only changes into
	// that state.
	Proposal, State string
	// SinceSeq starts after this sequence: pass the Seq of the last change
	// you received to resume without missing one. 0 starts with the
	// changes folded from now on.
	SinceSeq uint64
}

// Watch streams the changes of proposals' states and anomalies, in stream
// order, as the ledger folds them (GET /v1/watch, Server-Sent Events). The
// loop ends when ctx ends, when the caller breaks out, or after an error
// is yielded (the connection dropped: resume with SinceSeq set to the last
// change's Seq, and nothing is missed). ctx alone bounds it.
func (c *Client) Watch(ctx context.Context, o WatchOptions) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
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
		if o.SinceSeq > 0 {
			q.Set("since_seq", strconv.FormatUint(o.SinceSeq, 10))
		}
		resp, err := c.send(ctx, c.streaming(), http.MethodGet, "/v1/watch", q, nil, "")
		if err != nil {
			yield(Change{}, err)
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data.Len() == 0 {
					continue // an id-only message (heartbeat) or a comment
				}
				var ch Change
				err := json.Unmarshal([]byte(data.String()), &ch)
				data.Reset()
				if err != nil {
					yield(Change{}, fmt.Errorf("client: watch: a change is not JSON: %w", err))
					return
				}
				if !yield(ch, nil) {
					return
				}
			case strings.HasPrefix(line, "data:"):
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
		err = sc.Err()
		if err == nil {
			err = fmt.Errorf("client: watch: the ledger closed the stream")
		}
		if ctx.Err() == nil {
			yield(Change{}, fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
	}
}
