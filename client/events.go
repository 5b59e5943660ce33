package client

import (
	"context"
	"iter"
	"net/http"
	"strconv"

	"github.com/mewledger/ledger/api"
)

// AllSpaces as EventFilter.Space lists the events of every space.
const AllSpaces = "*"

// EventFilter holds the event filters; empty fields do not filter.
type EventFilter struct {
	// Space is the space (AllSpaces for every one); "" is the client's.
	Space string
	// Effect: applied, recorded, duplicate, late, unauthorized, invalid,
	// orphan, ignored.
	Effect, Type, Kind, Form, From string
	// Proposal: events filed under this id; Event: the envelope id.
	Proposal, Event             string
	Anomaly, Tool, Reason, Code string
	// Since and Until bound the stream time (RFC 3339), both inclusive;
	// SinceSeq and UntilSeq the sequence.
	Since, Until       string
	SinceSeq, UntilSeq uint64
	// Desc lists the newest first.
	Desc bool
	// Limit is the page size (server default when 0).
	Limit int
	// AsOfSeq caps the list at that sequence (the log as of then).
	AsOfSeq uint64
}

func (c *Client) eventValues(f EventFilter, cursor string) map[string][]string {
	q := c.spaceValues(f.Space)
	for k, v := range map[string]string{"effect": f.Effect, "type": f.Type, "kind": f.Kind, "form": f.Form, "from": f.From,
		"proposal": f.Proposal, "event": f.Event, "anomaly": f.Anomaly, "tool": f.Tool, "reason": f.Reason, "code": f.Code,
		"since": f.Since, "until": f.Until, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]uint64{"since_seq": f.SinceSeq, "until_seq": f.UntilSeq, "as_of_seq": f.AsOfSeq} {
		if v > 0 {
			q.Set(k, strconv.FormatUint(v, 10))
		}
	}
	if f.Desc {
		q.Set("order", "desc")
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// EventsPage returns one page of events in stream order (newest first with
// Desc), starting at cursor ("" for the first page).
func (c *Client) EventsPage(ctx context.Context, f EventFilter, cursor string) (*api.EventPage, error) {
	var p api.EventPage
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/events", c.eventValues(f, cursor), nil, "", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Events iterates over every event the filter selects, a page at a time.
// An error ends the iteration after it is yielded.
func (c *Client) Events(ctx context.Context, f EventFilter) iter.Seq2[*api.EventRecord, error] {
	return func(yield func(*api.EventRecord, error) bool) {
		cursor := ""
		for {
			page, err := c.EventsPage(ctx, f, cursor)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Events {
				if !yield(&page.Events[i], nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			cursor = page.NextCursor
		}
	}
}

// RawEventAt returns the stored message at seq, raw, with its record. space
// is the space it must be in ("" the client's, AllSpaces any); a sequence
// the stream does not hold, or of another space, is an *Error matching
// ErrNotFound.
func (c *Client) RawEventAt(ctx context.Context, seq uint64, space string) (*api.RawEvent, error) {
	var r api.RawEvent
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/events/"+strconv.FormatUint(seq, 10), c.spaceValues(space), nil, "", &r); err != nil {
		return nil, err
	}
	return &r, nil
}
