package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	httpapi "github.com/mewledger/ledger/internal/server/api"
)

// sseEvent is one SSE message as a client sees it.
type sseEvent struct {
	id, event string
	hasID     bool
	change    api.Change
	raw       string // the data
}

// sseStream reads SSE messages from a /v1/watch response.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

func openWatch(t *testing.T, ctx context.Context, url string, lastID string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next message that carries data (comments and id-only
// messages are skipped; an id-only message's id is returned in skippedID).
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("watch stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if len(data) == 0 {
				ev = sseEvent{}
				continue
			}
			ev.raw = strings.Join(data, "\n")
			if err := json.Unmarshal([]byte(ev.raw), &ev.change); err != nil {
				s.t.Fatalf("bad change %q: %v", data, err)
			}
			return ev
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id, ev.hasID = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "retry: "):
		default:
			s.t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

func describe(ev sseEvent) string {
	c := ev.change
	id := "-"
	if ev.hasID {
		id = ev.id
	}
	return fmt.Sprintf("id=%s %d %s %s→%s %v", id, c.Seq, c.ID, c.PrevState, c.State, c.Added)
}

func collect(s *sseStream, n int) []string {
	var out []string
	for range n {
		ev := s.next()
		if ev.event != "change" {
			s.t.Fatalf("event type %q", ev.event)
		}
		out = append(out, describe(ev))
	}
	return out
}

func batchReject(id, from, reason string, targets ...string) string {
	cs, _ := json.Marshal(targets)
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"mcp/reject","correlation_id":%s,"payload":{"reason":%q}}`, id, from, cs, reason)
}

// TestWatchOrderResumeAndFilters runs /v1/watch on a real ledger: changes
// come in stream order, a change of several proposals at one sequence
// carries the id only on its last message, a reconnect with Last-Event-ID
// gets exactly what came after, and the filters and bad parameters behave.
func TestWatchOrderResumeAndFilters(t *testing.T) {
	l := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	live := openWatch(t, ctx, l.url+"/v1/watch", "")       // from now on
	l.post(goldenProposal)                                 // 1
	l.post(goldenFulfil)                                   // 2
	l.post(goldenResponse)                                 // 3: no change
	l.post(proposal("a", "ann", nil, "tools/call"))        // 4
	l.post(proposal("b", "ann", nil, "tools/call"))        // 5
	l.post(batchReject("rj", "fs", "unsafe", "a", "b"))    // 6: two changes
	l.post(chat("c1", "fs", "rj", "outside the sandbox"))  // 7: no change
	l.post(fulfil("f2", "bob", "env-req-1", "tools/call")) // 8: anomaly
	want := []string{
		"id=1 1 env-req-1 →pending []",
		"id=2 2 env-req-1 pending→fulfilled []",
		"id=4 4 a →pending []",
		"id=5 5 b →pending []",
		"id=- 6 a pending→rejected []",
		"id=6 6 b pending→rejected []",
		"id=8 8 env-req-1 fulfilled→fulfilled [fulfillment_mismatch target_mismatch multiple_fulfillments]",
	}
	got := collect(live, len(want))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("live watch:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Resume: Last-Event-ID 5 (what an EventSource sends) gets 6.. whole,
	// and wins over since_seq.
	resumed := openWatch(t, ctx, l.url+"/v1/watch?since_seq=1", "5")
	if got := collect(resumed, 3); strings.Join(got, "\n") != strings.Join(want[4:], "\n") {
		t.Fatalf("resumed after 5:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want[4:], "\n"))
	}
	// since_seq=0 replays everything, then goes on live.
	all := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0", "")
	if got := collect(all, len(want)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("since_seq=0:\n%s", strings.Join(got, "\n"))
	}
	// Filters: one proposal; one state.
	one := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0&proposal=b", "")
	if got := collect(one, 2); got[0] != "id=5 5 b →pending []" || got[1] != "id=6 6 b pending→rejected []" {
		t.Fatalf("proposal=b: %q", got)
	}
	rej := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0&state=rejected", "")
	if got := collect(rej, 2); got[0] != "id=- 6 a pending→rejected []" || got[1] != "id=6 6 b pending→rejected []" {
		t.Fatalf("state=rejected: %q", got)
	}
	// Live after replay: a new change reaches every open stream in order.
	l.post(withdraw("w9", "ann", "a", "late"))      // 9: late, no change
	l.post(proposal("d", "dan", nil, "tools/call")) // 10
	for name, s := range map[string]*sseStream{"live": live, "resumed": resumed, "all": all} {
		if got := collect(s, 1)[0]; got != "id=10 10 d →pending []" {
			t.Fatalf("%s: after the replay got %q", name, got)
		}
	}
	// Another space sees nothing of this one.
	other := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0&space=other", "")
	l.postTo("other", proposal("o1", "x", nil, "tools/call"))
	if got := collect(other, 1)[0]; got != "id=11 11 o1 →pending []" {
		t.Fatalf("space other: %q", got)
	}

	l.wantError("GET", "/v1/watch?state=done", "", nil, 400, "bad_query", "state")
	l.wantError("GET", "/v1/watch?since_seq=x", "", nil, 400, "bad_query", "since_seq")
	l.wantError("GET", "/v1/watch?limit=3", "", nil, 400, "unknown_parameter", "limit")

	// The JSON pages of the same index.
	var page httpapi.ChangesPage
	l.get("/v1/changes?since_seq=5&limit=1", 200, &page)
	if len(page.Changes) != 2 || page.Changes[1].ID != "b" || page.Through != 6 || !page.More {
		t.Fatalf("/v1/changes since 5 limit 1: %+v (a sequence is never split)", page)
	}
	l.get("/v1/changes?since_seq=6", 200, &page)
	if len(page.Changes) != 2 || page.Changes[0].Seq != 8 || page.Changes[1].Seq != 10 || page.More || page.Through < 10 {
		t.Fatalf("/v1/changes since 6: %+v", page)
	}
	l.wantError("GET", "/v1/changes?limit=0", "", nil, 400, "bad_query", "limit")
}

// TestWatchHeartbeatMovesPosition: an idle filtered stream gets heartbeats
// whose id moves past the changes it skipped, so a reconnect does not scan
// them again.
func TestWatchHeartbeatMovesPosition(t *testing.T) {
	l := start(t)
	l.post(proposal("a", "ann", nil, "tools/call"))
	srv := watchServer(t, l, httpapi.Options{HeartbeatInterval: 50 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openWatch(t, ctx, srv.URL+"/v1/watch?since_seq=0&proposal=zzz", "")
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "id: 1\n" {
			return
		}
		if strings.HasPrefix(line, "data:") {
			t.Fatalf("a change for another proposal: %q", line)
		}
	}
}

// watchServer serves a second API over the ledger's live store with o
// (for its watch settings) on a real HTTP server; wrap, when set, wraps
// every accepted connection.
func watchServer(t *testing.T, l *ledgerT, o httpapi.Options, wrap func(net.Conn) net.Conn) *httptest.Server {
	t.Helper()
	o.Reader = l.app.Store()
	o.StreamSeq = func(context.Context) (uint64, error) { return l.app.Store().AppliedSeq(), nil }
	a, err := httpapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Handler())
	if wrap != nil {
		srv.Listener = wrapListener{srv.Listener, wrap}
	}
	srv.Config.RegisterOnShutdown(a.StopWatches)
	srv.Start()
	t.Cleanup(func() { a.StopWatches(); srv.Close() })
	return srv
}

type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (w wrapListener) Accept() (net.Conn, error) {
	c, err := w.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return w.wrap(c), nil
}

// logWatch is a zerolog writer that signals the first "dropped" line.
type logWatch struct {
	dropped chan struct{}
	once    sync.Once
}

func (l *logWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("watch client dropped")) {
		l.once.Do(func() { close(l.dropped) })
	}
	return len(p), nil
}

// TestWatchSlowClientDropped: a watcher that stops reading never holds
// the projector back — the ledger folds everything while the client reads
// nothing — and is dropped once a write to it blocks longer than
// WatchWriteTimeout: the client then finds its stream ended, short of the
// last change.
func TestWatchSlowClientDropped(t *testing.T) {
	l := start(t)
	lw := &logWatch{dropped: make(chan struct{})}
	small := func(c net.Conn) net.Conn {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(4096) // the kernel's buffer for this client is small
		}
		return c
	}
	srv := watchServer(t, l, httpapi.Options{WatchWriteTimeout: 200 * time.Millisecond, WatchPage: 64,
		Logger: zerolog.New(lw)}, small)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/watch?since_seq=0 HTTP/1.1\r\nHost: x\r\n\r\n")

	// 3000 proposals, about 700 KB of changes: far more than the socket
	// buffers hold.
	const n = 3000
	var body bytes.Buffer
	for i := range n {
		body.WriteString(proposal(fmt.Sprintf("slow-%04d", i), "ann", []string{"bob"}, "tools/call"))
		body.WriteByte('\n')
	}
	status, _, resp := l.do(http.MethodPost, "/v1/events", "application/x-ndjson", body.Bytes())
	if status != http.StatusAccepted && status != http.StatusOK {
		t.Fatalf("NDJSON post: %d %s", status, resp)
	}
	last := uint64(n)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := l.app.Store().WaitApplied(ctx, last); err != nil {
		t.Fatalf("the projector did not fold all %d events while a watcher was not reading: %v", n, err)
	}
	select {
	case <-lw.dropped:
	case <-ctx.Done():
		t.Fatal("the slow watcher was never dropped")
	}
	// Now read what the kernel buffered: the stream ends early.
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	got, rerr := io.ReadAll(conn)
	if ne, ok := rerr.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server did not close the dropped stream")
	}
	changes := bytes.Count(got, []byte("event: change"))
	if changes >= n {
		t.Fatalf("the dropped client received all %d changes", changes)
	}
	t.Logf("the dropped client had %d changes buffered of %d", changes, n)
	// A client that reads gets everything, from the index, afterwards.
	s := openWatch(t, ctx, srv.URL+"/v1/watch?since_seq=0", "")
	for i := range n {
		if ev := s.next(); ev.change.Seq != uint64(i+1) {
			t.Fatalf("change %d: seq %d", i, ev.change.Seq)
		}
	}
}

// TestWatchEndsOnShutdown: an open stream does not hold the server's
// shutdown up: closing the ledger ends it.
func TestWatchEndsOnShutdown(t *testing.T) {
	l := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openWatch(t, ctx, l.url+"/v1/watch", "")
	l.post(proposal("a", "ann", nil, "tools/call"))
	if got := collect(s, 1)[0]; got != "id=1 1 a →pending []" {
		t.Fatalf("got %q", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- l.app.Close() }()
	if _, err := io.Copy(io.Discard, s.r); err != nil && ctx.Err() != nil {
		t.Fatalf("the stream did not end: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the ledger did not close with a watch open")
	}
}

// TestWatchAcrossOnlineRebuild: an open stream goes on through an online
// rebuild (the new store's change index is the same), without a gap or a
// repeat.
func TestWatchAcrossOnlineRebuild(t *testing.T) {
	l := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0", "")
	l.post(proposal("a", "ann", nil, "tools/call"))
	l.post(reject("r1", "fs", "a", "unsafe"))
	if got := collect(s, 2); got[1] != "id=2 2 a pending→rejected []" {
		t.Fatalf("before the rebuild: %q", got)
	}
	status, _, body := l.do(http.MethodPost, "/v1/ops/rebuild?wait=true", "", nil)
	if status != http.StatusOK {
		t.Fatalf("rebuild: %d %s", status, body)
	}
	l.post(proposal("b", "bob", nil, "tools/call"))
	if got := collect(s, 1)[0]; got != "id=3 3 b →pending []" {
		t.Fatalf("after the rebuild: %q", got)
	}
	// And the rebuilt index replays the same history.
	again := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0", "")
	if got := strings.Join(collect(again, 3), "; "); got != "id=1 1 a →pending []; id=2 2 a pending→rejected []; id=3 3 b →pending []" {
		t.Fatalf("replay after the rebuild: %s", got)
	}
}
