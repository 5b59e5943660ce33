package projections

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestPostingListsMatchRecords folds a log of a few blocks' length (with
// disorder: orphans whose records change in a later batch) in runs that do
// not line up with the blocks, and requires every filtered page, in both
// orders and followed by cursor, to list exactly the records that match
// when filtered one by one; and a second store folded in other runs to
// hold the same bytes.
func TestPostingListsMatchRecords(t *testing.T) {
	log := mixLog(t, 1<<postingShift+400)
	fold := func(size int) *Store {
		s := openMemStore(t)
		pl, err := NewPipeline(s, PipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range runs(log, 0, size) {
			if err := pl.Fold(run, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s, other := fold(137), fold(1000)
	var a, b bytes.Buffer
	if err := s.Dump(&a); err != nil {
		t.Fatal(err)
	}
	if err := other.Dump(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same log folded in other runs wrote other bytes")
	}
	var all []EventRecord
	for cursor := ""; ; {
		p, err := s.Events(EventQuery{Cursor: cursor, Limit: MaxEventLimit})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Events...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != len(log) {
		t.Fatalf("%d records, want %d", len(all), len(log))
	}
	// The filter values that occur, by field.
	values := map[string][]string{}
	note := func(field, v string) {
		if v != "" && !slices.Contains(values[field], v) {
			values[field] = append(values[field], v)
		}
	}
	for _, r := range all {
		note("space", r.Space)
		note("type", r.Type)
		note("kind", r.Kind)
		note("form", r.Form)
		note("from", r.From)
		note("tool", r.Tool)
		note("reason", r.Reason)
		for _, e := range r.Effects {
			note("effect", string(e))
		}
		for _, an := range r.Anomalies {
			note("anomaly", an)
		}
		for _, e := range r.Entries {
			note("code", e.Code)
		}
	}
	matches := func(r *EventRecord, q *EventQuery) bool {
		eff := false
		for _, e := range r.Effects {
			eff = eff || string(e) == q.Effect
		}
		code := false
		for _, e := range r.Entries {
			code = code || e.Code == q.Code
		}
		return (q.Space == "" || r.Space == q.Space) && (q.Type == "" || r.Type == q.Type) && (q.Kind == "" || r.Kind == q.Kind) &&
			(q.Form == "" || r.Form == q.Form) && (q.From == "" || r.From == q.From) && (q.Tool == "" || r.Tool == q.Tool) &&
			(q.Reason == "" || r.Reason == q.Reason) && (q.Effect == "" || eff) && (q.Code == "" || code) &&
			(q.Anomaly == "" || slices.Contains(r.Anomalies, q.Anomaly))
	}
	set := func(q *EventQuery, field, v string) {
		switch field {
		case "space":
			q.Space = v
		case "type":
			q.Type = v
		case "kind":
			q.Kind = v
		case "form":
			q.Form = v
		case "from":
			q.From = v
		case "tool":
			q.Tool = v
		case "reason":
			q.Reason = v
		case "effect":
			q.Effect = v
		case "anomaly":
			q.Anomaly = v
		case "code":
			q.Code = v
		}
	}
	fields := make([]string, 0, len(values))
	for f := range values {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	rng := rand.New(rand.NewSource(9))
	queries := 0
	for range 80 {
		var q EventQuery
		for range 1 + rng.Intn(3) {
			f := fields[rng.Intn(len(fields))]
			set(&q, f, values[f][rng.Intn(len(values[f]))])
		}
		if rng.Intn(3) == 0 {
			q.SinceSeq = uint64(rng.Intn(len(log)))
		}
		if rng.Intn(3) == 0 {
			q.UntilSeq = q.SinceSeq + uint64(rng.Intn(len(log)))
		}
		q.Desc = rng.Intn(2) == 0
		q.Limit = 1 + rng.Intn(300)
		var want []uint64
		for i := range all {
			r := &all[i]
			if matches(r, &q) && r.Seq >= q.SinceSeq && (q.UntilSeq == 0 || r.Seq <= q.UntilSeq) {
				want = append(want, r.Seq)
			}
		}
		if q.Desc {
			slices.Reverse(want)
		}
		var got []uint64
		for {
			p, err := s.Events(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Events {
				got = append(got, r.Seq)
			}
			if q.Cursor = p.NextCursor; q.Cursor == "" {
				break
			}
		}
		q.Cursor = ""
		if !slices.Equal(got, want) {
			t.Fatalf("%+v: got %d events %v, want %d %v", q, len(got), head(got), len(want), head(want))
		}
		queries++
	}
	t.Logf("%d queries over %d events, fields %v", queries, len(all), fields)
}

func head(s []uint64) string {
	if len(s) > 10 {
		return fmt.Sprint(s[:10]) + "..."
	}
	return fmt.Sprint(s)
}

// TestPostingEncoding round-trips blocks and refuses malformed ones.
func TestPostingEncoding(t *testing.T) {
	blk := uint64(5)
	first := blk << postingShift
	for _, seqs := range [][]uint64{{first}, {first + 1023}, {first, first + 1, first + 1023}} {
		v := appendPosting(nil, blk, seqs)
		got, err := decodePosting(nil, blk, v)
		if err != nil || !slices.Equal(got, seqs) {
			t.Fatalf("%v: got %v, %v", seqs, got, err)
		}
	}
	for _, v := range [][]byte{{0x80}, {1, 0}, {0x80, 0x08}} { // truncated, a repeat, past the block
		if _, err := decodePosting(nil, blk, v); err == nil {
			t.Fatalf("%x decoded", v)
		}
	}
}
