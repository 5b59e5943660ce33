package replay_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/ops/replay"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/subjects"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func read(t *testing.T, l *opsrig.Ledger, f replay.Filter) []*replay.Message {
	t.Helper()
	var out []*replay.Message
	info, err := replay.Read(ctx(t), l.JS, f, func(m *replay.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatalf("Read(%+v): %v", f, err)
	}
	if info.Matched != len(out) {
		t.Fatalf("info %+v for %d messages", info, len(out))
	}
	for i := 1; i < len(out); i++ {
		if out[i].Seq <= out[i-1].Seq {
			t.Fatalf("not in sequence order: %d after %d", out[i].Seq, out[i-1].Seq)
		}
	}
	return out
}

func seqs(ms []*replay.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func ids(ms []*replay.Message) []string {
	var out []string
	for _, m := range ms {
		ev, _ := subjects.ParseEvent(m.Subject)
		i := bytes.Index(m.Data, []byte(`"id":"`))
		j := bytes.IndexByte(m.Data[i+6:], '"')
		out = append(out, ev.Type+":"+string(m.Data[i+6:i+6+j]))
	}
	return out
}

func TestReplayFilters(t *testing.T) {
	l := opsrig.New(t)
	last := l.Traffic(t, 21, 300)
	all := read(t, l, replay.Filter{})
	if len(all) != int(last) || all[0].Seq != 1 || all[len(all)-1].Seq != last {
		t.Fatalf("unfiltered: %d messages, want %d", len(all), last)
	}

	t.Run("seq range", func(t *testing.T) {
		got := seqs(read(t, l, replay.Filter{SinceSeq: 5, UntilSeq: 9}))
		if len(got) != 5 || got[0] != 5 || got[4] != 9 {
			t.Fatalf("seqs %v", got)
		}
		if got := read(t, l, replay.Filter{SinceSeq: last - 1, UntilSeq: last + 100}); len(got) != 2 {
			t.Fatalf("until beyond the end reads to the end: %v", seqs(got))
		}
	})

	t.Run("time range", func(t *testing.T) {
		since, until := all[40].Time, all[120].Time
		var want []uint64
		started := false
		for _, m := range all {
			if !started && m.Time.Before(since) {
				continue
			}
			started = true
			if m.Time.After(until) {
				break
			}
			want = append(want, m.Seq)
		}
		got := seqs(read(t, l, replay.Filter{Since: since, Until: until}))
		if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || got[0] > 41 || got[len(got)-1] < 121 {
			t.Fatalf("time range: got %d (%v..), want %d", len(got), got[:1], len(want))
		}
	})

	t.Run("space and type", func(t *testing.T) {
		other := read(t, l, replay.Filter{Space: "other"})
		if len(other) != 20 {
			t.Fatalf("space other: %d messages", len(other))
		}
		for _, m := range other {
			if ev, _ := subjects.ParseEvent(m.Subject); ev.Space != "other" {
				t.Fatalf("space filter let %s through", m.Subject)
			}
		}
		var want int
		for _, m := range all {
			if ev, _ := subjects.ParseEvent(m.Subject); ev.Type == "response" && ev.Space == "default" {
				want++
			}
		}
		got := read(t, l, replay.Filter{Space: "default", Type: "response"})
		if len(got) != want || want == 0 {
			t.Fatalf("responses: %d, want %d", len(got), want)
		}
		if _, err := replay.Read(ctx(t), l.JS, replay.Filter{Type: "bogus"}, nil); !errors.Is(err, replay.ErrFilter) {
			t.Fatalf("unknown type: %v", err)
		}
	})

	t.Run("proposal with chained events", func(t *testing.T) {
		store := l.Fold(t, 0)
		got := ids(read(t, l, replay.Filter{Space: "default", Proposal: "chained", Histories: store}))
		want := []string{"proposal:chained", "fulfil:chained-f", "response:chained-r"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("chained: %v, want %v", got, want)
		}
		got = ids(read(t, l, replay.Filter{Space: "default", Proposal: "chained-2", Histories: store}))
		want = []string{"proposal:chained-2", "reject:chained-2-rej", "note:chained-2-why"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("chained-2: %v, want %v", got, want)
		}
		got = ids(read(t, l, replay.Filter{Space: "default", Proposal: "chained", Type: "response", Histories: store}))
		if strings.Join(got, ",") != "response:chained-r" {
			t.Fatalf("chained responses: %v", got)
		}
		if got := read(t, l, replay.Filter{Space: "default", Proposal: "no-such", Histories: store}); len(got) != 0 {
			t.Fatalf("unknown proposal: %v", ids(got))
		}
	})

	t.Run("json lines", func(t *testing.T) {
		var buf bytes.Buffer
		if _, err := replay.Read(ctx(t), l.JS, replay.Filter{SinceSeq: 1, UntilSeq: 3}, replay.JSONWriter(&buf)); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"seq":1,"time":"`) || strings.Contains(lines[0], `"hash"`) ||
			!strings.Contains(lines[0], `"raw":"{\"protocol\":\"mew/v0.4\",\"id\":\"ttl-exp\"`) {
			t.Fatalf("json lines:\n%s", buf.String())
		}
	})
}

func TestRepublish(t *testing.T) {
	l := opsrig.New(t)
	l.Traffic(t, 3, 50)
	target := opsrig.New(t) // another server

	var mu sync.Mutex
	var got []*nats.Msg
	sub, err := target.NC.Subscribe("audit.copy.>", func(m *nats.Msg) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := target.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	rp, err := replay.NewRepublisher(target.NC, "audit.copy", false)
	if err != nil {
		t.Fatal(err)
	}
	want := read(t, l, replay.Filter{Space: "default", Type: "proposal"})
	if _, err := replay.Read(ctx(t), l.JS, replay.Filter{Space: "default", Type: "proposal"}, rp.Func(ctx(t))); err != nil {
		t.Fatal(err)
	}
	if err := rp.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	deadline := testctx.Deadline(t)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) || rp.Published() != len(want) {
		t.Fatalf("republished %d (received %d), want %d", rp.Published(), len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		if m.Subject != "audit.copy"+strings.TrimPrefix(w.Subject, "ledger") || !bytes.Equal(m.Data, w.Data) ||
			m.Header.Get(replay.HeaderReplaySubject) != w.Subject || m.Header.Get(replay.HeaderReplayTime) != archive.FormatTime(w.Time) ||
			m.Header.Get("Nats-Msg-Id") != "" {
			t.Fatalf("message %d: %s %v, want copy of seq %d %s", i, m.Subject, m.Header, w.Seq, w.Subject)
		}
	}
	if _, err := replay.NewRepublisher(target.NC, "a.*", false); !errors.Is(err, subjects.ErrBadSubject) {
		t.Fatalf("wildcard prefix: %v", err)
	}
	same, _ := replay.NewRepublisher(l.NC, "ledger", false)
	if err := same.Publish(ctx(t), want[0]); !errors.Is(err, subjects.ErrBadSubject) {
		t.Fatalf("republish into the stream: %v", err)
	}
}

// TestRepublishJetStream: with JetStream, each copy is acknowledged by the
// target stream.
func TestRepublishJetStream(t *testing.T) {
	l := opsrig.New(t)
	last := l.Traffic(t, 4, 30)
	target := opsrig.New(t)
	st, err := target.JS.CreateStream(ctx(t), jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := replay.NewRepublisher(target.NC, "audit", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Read(ctx(t), l.JS, replay.Filter{}, rp.Func(ctx(t))); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != last {
		t.Fatalf("AUDIT holds %d messages, want %d (duplicates in the log must not be dropped)", info.State.Msgs, last)
	}
	// Without a stream binding the subjects, a JetStream republish fails.
	rp2, _ := replay.NewRepublisher(target.NC, "nowhere", true)
	if _, err := replay.Read(ctx(t), l.JS, replay.Filter{UntilSeq: 1}, rp2.Func(ctx(t))); err == nil {
		t.Fatal("republish to no stream succeeded")
	}
}
