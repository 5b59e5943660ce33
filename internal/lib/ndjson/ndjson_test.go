package ndjson_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/lib/ndjson"
)

func split(t testing.TB, in []byte, max int) []ndjson.Line {
	t.Helper()
	var got []ndjson.Line
	if err := ndjson.Split(bytes.NewReader(in), max, func(l ndjson.Line) error { got = append(got, l); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSplit(t *testing.T) {
	big := strings.Repeat("x", 100)
	got := split(t, []byte("a\r\n\n \t\nb\n"+big+"\r\nc"), 50)
	want := []struct {
		no   int
		data string
		size int
	}{{1, "a", 1}, {4, "b", 1}, {5, "", 101}, {6, "c", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.No != w.no || string(g.Data) != w.data || g.Size != w.size || (w.data == "") != g.Oversize() {
			t.Errorf("line %d: %+v, want %+v", i, g, w)
		}
	}
	// Lines longer than the reader's buffer are split correctly.
	long := strings.Repeat("y", 200000)
	got = split(t, []byte(long+"\n"+long), 300000)
	if len(got) != 2 || string(got[0].Data) != long || string(got[1].Data) != long || got[1].No != 2 {
		t.Fatalf("long lines: %d lines", len(got))
	}
	stop := errors.New("stop")
	if err := ndjson.Split(strings.NewReader("a\nb\n"), 10, func(ndjson.Line) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn error: %v", err)
	}
}

// FuzzSplit checks Split against a plain reference: every non-blank line
// is reported once, numbered as in the input, with its exact bytes (minus
// one trailing "\r") when within the limit.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("{}\n\n{\"a\":1}\r\n"), 8)
	f.Add([]byte("no newline at end"), 4)
	f.Add([]byte("   \n\t\r\n"), 1)
	f.Add(bytes.Repeat([]byte("x"), 300), 100)
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		// Small inputs keep the fuzzer fast; lines longer than the
		// reader's buffer are covered by TestSplit.
		if max < 1 || max > 4096 || len(body) > 8192 {
			return
		}
		type ref struct {
			no   int
			data []byte
		}
		var want []ref
		for i, l := range bytes.Split(body, []byte("\n")) {
			if len(bytes.Trim(l, " \t\r")) > 0 {
				want = append(want, ref{i + 1, bytes.TrimSuffix(l, []byte("\r"))})
			}
		}
		got := split(t, body, max)
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
		for i, g := range got {
			w := want[i]
			if g.No != w.no {
				t.Fatalf("line %d numbered %d", w.no, g.No)
			}
			if len(w.data) <= max {
				if !bytes.Equal(g.Data, w.data) {
					t.Fatalf("line %d: %q, want %q", w.no, g.Data, w.data)
				}
			} else if !g.Oversize() || g.Size < max {
				t.Fatalf("line %d (%d bytes): not oversize at limit %d: %+v", w.no, len(w.data), max, g)
			}
		}
	})
}
