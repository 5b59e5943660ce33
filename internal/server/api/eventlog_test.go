package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// eventsLedger is a ledger holding a proposal and its rejection, a
// fulfilment with no proposal (an orphan), a garbage message published
// straight onto the stream (invalid, not_json, no proposal) and a
// proposal of another space; it returns the garbage's sequence and bytes.
func eventsLedger(t *testing.T) (*ledgerT, uint64, []byte) {
	t.Helper()
	l := start(t)
	l.post(proposal("p1", "agent", []string{"fs"}, "tools/call"))
	l.post(reject("r1", "fs", "p1", "unsafe"))
	l.post(fulfil("f-orphan", "human", "p-missing", "tools/call"))
	garbage := []byte("this is not json \x00\xff")
	subj := subjects.Event{Space: "default", Key: "env-req-6", Type: "proposal", Sender: "mallory"}.String()
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	ack, err := l.app.JetStream().Publish(ctx, subj, garbage)
	if err != nil {
		t.Fatal(err)
	}
	last := l.postTo("other", proposal("p1", "carol", nil, "tools/call"))
	var p projections.EventPage
	l.get(fmt.Sprintf("/v1/events?space=*&min_seq=%d", last.Seq), http.StatusOK, &p)
	return l, ack.Sequence, garbage
}

func TestEventsList(t *testing.T) {
	l, garbageSeq, _ := eventsLedger(t)
	seqs := func(path string) []uint64 {
		t.Helper()
		var p projections.EventPage
		l.get(path, http.StatusOK, &p)
		var out []uint64
		for _, e := range p.Events {
			out = append(out, e.Seq)
		}
		return out
	}
	// Default space only, in stream order; * is every space.
	if got := seqs("/v1/events"); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("default space: %v", got)
	}
	if got := seqs("/v1/events?space=*"); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("every space: %v", got)
	}
	// The garbage: found by effect, with the fold's reason and no proposal.
	var p projections.EventPage
	l.get("/v1/events?effect=invalid", http.StatusOK, &p)
	if len(p.Events) != 1 || p.Events[0].Seq != garbageSeq || p.Events[0].Code != "invalid_utf8" || p.Events[0].From != "mallory" ||
		fmt.Sprint(p.Events[0].Proposals) != "[env-req-6]" || p.Events[0].Detail == "" {
		t.Errorf("effect=invalid: %+v", p.Events)
	}
	if got := seqs("/v1/events?effect=orphan&from=human"); fmt.Sprint(got) != "[3]" {
		t.Errorf("orphan from human: %v", got)
	}
	if got := seqs("/v1/events?proposal=p1&reason=unsafe"); fmt.Sprint(got) != "[2]" {
		t.Errorf("rejection by reason: %v", got)
	}
	if got := seqs("/v1/events?space=other&type=proposal"); fmt.Sprint(got) != "[5]" {
		t.Errorf("other space: %v", got)
	}
	if got := seqs("/v1/events?as_of_seq=2&space=*"); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("as of seq 2: %v", got)
	}
	if got := seqs("/v1/events?since_seq=2&until_seq=3"); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("seq range: %v", got)
	}
	// Newest first, paged by cursor, and back again.
	var all []uint64
	path := "/v1/events?space=*&order=desc&limit=2"
	for i := 0; i < 5; i++ {
		var pg projections.EventPage
		l.get(path, http.StatusOK, &pg)
		for _, e := range pg.Events {
			all = append(all, e.Seq)
		}
		if pg.NextCursor == "" {
			break
		}
		path = "/v1/events?space=*&order=desc&limit=2&cursor=" + pg.NextCursor
	}
	if fmt.Sprint(all) != "[5 4 3 2 1]" {
		t.Errorf("desc pages: %v", all)
	}
	var first projections.EventPage
	l.get("/v1/events?limit=1", http.StatusOK, &first)
	l.wantError(http.MethodGet, "/v1/events?order=desc&cursor="+first.NextCursor, "", nil, http.StatusBadRequest, "bad_query", "cursor")
	l.wantError(http.MethodGet, "/v1/events?effect=bogus", "", nil, http.StatusBadRequest, "bad_query", "effect")
	l.wantError(http.MethodGet, "/v1/events?anomaly=bogus", "", nil, http.StatusBadRequest, "bad_query", "anomaly")
	l.wantError(http.MethodGet, "/v1/events?order=sideways", "", nil, http.StatusBadRequest, "bad_query", "order")
	l.wantError(http.MethodGet, "/v1/events?since_seq=x", "", nil, http.StatusBadRequest, "bad_query", "since_seq")
	l.wantError(http.MethodGet, "/v1/events?limit=0", "", nil, http.StatusBadRequest, "bad_query", "limit")
	l.wantError(http.MethodGet, "/v1/events?bogus=1", "", nil, http.StatusBadRequest, "unknown_parameter", "bogus")
}

func TestEventRaw(t *testing.T) {
	l, garbageSeq, garbage := eventsLedger(t)
	var raw api.RawEvent
	l.get(fmt.Sprintf("/v1/events/%d", garbageSeq), http.StatusOK, &raw)
	sum := sha256.Sum256(garbage)
	if !bytes.Equal(raw.Data, garbage) || raw.SHA256 != hex.EncodeToString(sum[:]) || raw.Text != "" {
		t.Errorf("raw bytes: %q sha %s text %q", raw.Data, raw.SHA256, raw.Text)
	}
	if raw.Subject != "ledger.default.env-req-6.proposal.mallory" || raw.Time.IsZero() || raw.Event == nil || raw.Event.Effect != api.EffectInvalid {
		t.Errorf("raw: %+v", raw)
	}
	// A posted envelope: its Nats-Msg-Id and text.
	l.get("/v1/events/1", http.StatusOK, &raw)
	if raw.MsgID == "" || raw.Text != string(raw.Data) || raw.Event.ID != "p1" || raw.Event.Tool != "x" {
		t.Errorf("seq 1: %+v", raw)
	}
	l.wantError(http.MethodGet, "/v1/events/5", "", nil, http.StatusNotFound, "not_found", "seq")
	l.get("/v1/events/5?space=other", http.StatusOK, &raw)
	l.get("/v1/events/5?space=*", http.StatusOK, &raw)
	l.wantError(http.MethodGet, "/v1/events/99", "", nil, http.StatusNotFound, "not_found", "seq")
	l.wantError(http.MethodGet, "/v1/events/zero", "", nil, http.StatusBadRequest, "bad_query", "seq")
}

// TestStatusConsumers: /v1/status lists the stream's consumers, the
// projector's durable among them, caught up with the stream.
func TestStatusConsumers(t *testing.T) {
	l := start(t)
	last := l.post(proposal("p1", "agent", nil, "tools/call"))
	var st api.Status
	l.get(fmt.Sprintf("/v1/status?min_seq=%d", last.Seq), http.StatusOK, &st)
	durable := false
	for _, c := range st.Consumers {
		durable = durable || (c.Durable && c.Delivered >= last.Seq)
	}
	if !durable {
		t.Fatalf("no durable consumer caught up in %+v", st.Consumers)
	}
}
