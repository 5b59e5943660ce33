package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// syncBuf is a bytes.Buffer safe for the logger goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestLogMode runs in a synctest bubble: the periodic line is written
// when the fake clock passes the interval, not when a sleep lets it.
func TestLogMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuf
		r := New(100, Options{Description: "rebuild", Out: &bytes.Buffer{}, Logger: zerolog.New(&logs), Interval: 20 * time.Millisecond})
		if r.o.Mode != Log {
			t.Fatalf("a buffer is not a terminal: mode %v, want Log", r.o.Mode)
		}
		r.Update(10, 0)
		r.Update(50, 0)
		synctest.Wait()
		if n := len(logs.lines()); n != 0 {
			t.Fatalf("%d lines before the first interval", n)
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait() // the log loop has written its line
		if n := len(logs.lines()); n != 1 {
			t.Fatalf("%d lines after one interval, want 1", n)
		}
		r.Update(100, 0)
		r.Finish(nil)
		r.Finish(nil) // idempotent
		ls := logs.lines()
		if len(ls) != 2 {
			t.Fatalf("want a periodic and a final line, got %v", ls)
		}
		last := ls[len(ls)-1]
		if last["message"] != "rebuild finished" || last["done"] != float64(100) || last["percent"] != float64(100) {
			t.Fatalf("final line: %v", last)
		}
		if ls[0]["message"] != "rebuild" || ls[0]["total"] != float64(100) || ls[0]["done"] != float64(50) {
			t.Fatalf("periodic line: %v", ls[0])
		}
	})
}

func TestBarModeAndError(t *testing.T) {
	var out, logs syncBuf
	r := New(10, Options{Description: "export", Out: &out, Logger: zerolog.New(&logs), Mode: Bar})
	r.Update(3, 0)
	r.Update(4, 20) // total grows
	r.Finish(errors.New("boom"))
	if !strings.Contains(out.b.String(), "export") {
		t.Fatalf("bar output: %q", out.b.String())
	}
	ls := logs.lines()
	if len(ls) != 1 || ls[0]["level"] != "warn" || ls[0]["message"] != "export stopped" || ls[0]["total"] != float64(20) {
		t.Fatalf("final line: %v", ls)
	}
}

func TestNilReporter(t *testing.T) {
	var r *Reporter
	r.Update(1, 2)
	r.Finish(nil)
	if r.Func() != nil {
		t.Fatal("nil reporter Func must be nil")
	}
}

// TestRenderOneRate: the bar's line shows one rate, in events per second,
// whatever unit the position is counted in.
func TestRenderOneRate(t *testing.T) {
	// publish -f: 450 of 1000 bytes read, 120 events, 100 of them in the
	// 2 s since the first update, in which 300 bytes went by.
	got := Render("publish", 450, 1000, 100, 120, 300, 2*time.Second)
	want := "publish  45% |█████████████                 | 120 events  50 events/s  ETA 4s"
	if got != want {
		t.Fatalf("Render:\n got %q\nwant %q", got, want)
	}
	// No total known: no percent, no ETA; nothing yet: no rate.
	if got := Render("rebuild", 7, 0, 7, 7, 7, time.Second); got != "rebuild 7 events  7 events/s" {
		t.Fatalf("Render without a total: %q", got)
	}
	if got := Render("import", 0, 10, 0, 0, 0, 0); got != "import   0% |                              | 0 events" {
		t.Fatalf("Render at the start: %q", got)
	}
}

// TestBarCountsBytesRatesEvents: a bar whose position is in bytes draws
// every line with exactly one rate, events/s, and ends with a newline.
func TestBarCountsBytesRatesEvents(t *testing.T) {
	var out syncBuf
	r := New(1000, Options{Description: "publish", Unit: "bytes", Out: &out, Mode: Bar})
	for i := uint64(1); i <= 10; i++ {
		r.Events(i)
		r.Update(i*100, 0)
	}
	r.Finish(nil)
	s := out.b.String()
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("the bar does not end its line: %q", s)
	}
	frames := strings.Split(strings.TrimSuffix(s, "\n"), "\r")
	last := strings.TrimSpace(frames[len(frames)-1])
	if !strings.HasPrefix(last, "publish 100% |") || !strings.Contains(last, " 10 events") {
		t.Fatalf("last frame %q", last)
	}
	for _, f := range frames {
		if strings.Contains(f, "bytes") || strings.Count(f, "/s") > 1 || (strings.Contains(f, "/s") && !strings.Contains(f, "events/s")) {
			t.Fatalf("frame with another rate: %q", f)
		}
	}
}
