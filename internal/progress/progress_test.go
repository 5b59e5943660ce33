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
