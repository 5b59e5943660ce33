package archive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func export(t *testing.T, l *opsrig.Ledger, o archive.ExportOptions) ([]byte, archive.Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := archive.Export(ctx(t), l.JS, &buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

// onlyReader hides Seek, like a pipe.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func streamInfo(t *testing.T, l *opsrig.Ledger) (msgs, last, marker uint64) {
	t.Helper()
	s, err := l.JS.Stream(ctx(t), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, info.State.LastSeq, ledger.ImportedThrough(info.Config.Metadata)
}

// TestExportImportSameProjection: export → verify → import into a fresh
// server → rebuild gives byte for byte the original's projection, although
// every imported message is stored at a new time (ttl'd proposals, a late
// fulfilment and a ledger/expire event make the fold depend on time).
func TestExportImportSameProjection(t *testing.T) {
	src := opsrig.New(t)
	last := src.Traffic(t, 11, 800)
	want := opsrig.Dump(t, src.Fold(t, 0))

	var progressed uint64
	data, sum := export(t, src, archive.ExportOptions{Progress: func(done, total uint64) {
		if total != last {
			t.Errorf("export progress total %d, want %d", total, last)
		}
		progressed = done
	}})
	if sum.Lines != int(last) || sum.FirstSeq != 1 || sum.LastSeq != last || !sum.Contiguous || progressed != last {
		t.Fatalf("export summary %+v (progress %d), want %d contiguous lines", sum, progressed, last)
	}
	vs, err := archive.VerifyChain(bytes.NewReader(data))
	if err != nil || !reflect.DeepEqual(vs, sum) {
		t.Fatalf("VerifyChain = %+v, %v; want %+v", vs, err, sum)
	}

	dst := opsrig.New(t)
	time.Sleep(50 * time.Millisecond) // the copies are stored well after the originals
	// Through a pipe (spooled), in small batches (several marker updates).
	res, err := archive.Import(ctx(t), dst.JS, onlyReader{bytes.NewReader(data)}, archive.ImportOptions{BatchSize: 97})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != int(last) || res.FirstSeq != 1 || res.LastSeq != last || res.Offset != 0 || !reflect.DeepEqual(res.File, sum) {
		t.Fatalf("import result %+v", res)
	}
	if msgs, l, marker := streamInfo(t, dst); msgs != last || l != last || marker != last {
		t.Fatalf("destination: %d messages, last %d, marker %d; want %d", msgs, l, marker, last)
	}
	got := opsrig.Dump(t, dst.Fold(t, 0))
	if !bytes.Equal(got, want) {
		t.Fatalf("imported projection differs from the original (%d vs %d bytes)", len(got), len(want))
	}

	// The copy exports to the same seq, time, subject and raw bytes; only
	// headers (and so hashes) differ: import ids and the original Msg-Id.
	again, _ := export(t, dst, archive.ExportOptions{})
	a, b := records(t, data), records(t, again)
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Time != b[i].Time || a[i].Subject != b[i].Subject || !bytes.Equal(a[i].Raw, b[i].Raw) {
			t.Fatalf("line %d differs after a round trip:\n%+v\n%+v", i+1, a[i], b[i])
		}
		id := b[i].Headers[archive.HeaderOriginalMsgID]
		if orig := a[i].Headers["Nats-Msg-Id"]; len(orig) != 1 || len(id) != 1 || id[0] != orig[0] {
			t.Fatalf("line %d: original Msg-Id %v not kept (%v)", i+1, orig, b[i].Headers)
		}
		if !strings.HasPrefix(b[i].Headers["Nats-Msg-Id"][0], archive.ImportMsgIDPrefix+strconv.FormatUint(a[i].Seq, 10)+"/") {
			t.Fatalf("line %d: import Msg-Id %v", i+1, b[i].Headers["Nats-Msg-Id"])
		}
	}
}

func records(t *testing.T, data []byte) []*archive.Record {
	t.Helper()
	var out []*archive.Record
	cr := archive.NewChainReader(bytes.NewReader(data))
	for {
		r, err := cr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
}

// TestTamperedLineNamed: one byte changed in any field of line 3 (or the
// line removed, or its seq made to go backwards) is named by VerifyChain
// and by Import, which writes nothing.
func TestTamperedLineNamed(t *testing.T) {
	src := opsrig.New(t)
	for i := range 6 {
		src.AppendOne(t, "", opsrig.Env("p"+strconv.Itoa(i), "alice", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	}
	data, _ := export(t, src, archive.ExportOptions{})
	lines := strings.SplitAfter(string(data), "\n")
	dst := opsrig.New(t)

	// change replaces the first occurrence of old after marker in line 3.
	change := func(marker, old, new string) string {
		l := lines[2]
		i := strings.Index(l, marker)
		if i < 0 {
			t.Fatalf("no %q in %s", marker, l)
		}
		j := strings.Index(l[i:], old)
		if j < 0 {
			t.Fatalf("no %q after %q in %s", old, marker, l)
		}
		return l[:i+j] + new + l[i+j+len(old):]
	}
	hashOf := func(l string) string {
		i := strings.Index(l, `"hash":"`) + len(`"hash":"`)
		return l[i : i+64]
	}
	flip := func(s string) string { // change one hex digit
		b := []byte(s)
		if b[10] == '0' {
			b[10] = '1'
		} else {
			b[10] = '0'
		}
		return string(b)
	}
	cases := []struct {
		name string
		l3   *string // replacement for line 3; nil: remove line 3
		line int
		kind error
	}{
		{"raw", ptr(change(`"raw":`, `p2`, `p9`)), 3, archive.ErrHashMismatch},
		{"subject", ptr(change(`"subject":`, `alice`, `alicf`)), 3, archive.ErrHashMismatch},
		{"seq", ptr(change(`"seq":`, `3`, `4`)), 3, archive.ErrHashMismatch},
		{"seq backwards", ptr(change(`"seq":`, `3`, `2`)), 3, archive.ErrSeqOrder},
		{"time", ptr(change(`"time":"`, `:`, `;`)), 3, archive.ErrMalformed}, // no longer RFC 3339
		{"time digit", ptr(change(`"time":"`, `20`, `21`)), 3, archive.ErrHashMismatch},
		{"header", ptr(change(`"Nats-Msg-Id":["`, `default`, `defaulu`)), 3, archive.ErrHashMismatch},
		{"hash", ptr(strings.Replace(lines[2], hashOf(lines[2]), flip(hashOf(lines[2])), 1)), 3, archive.ErrHashMismatch},
		{"not json", ptr("{" + lines[2]), 3, archive.ErrMalformed},
		{"removed", nil, 3, archive.ErrHashMismatch}, // line 4 now at 3 no longer chains
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mod := append([]string(nil), lines[:2]...)
			if tc.l3 != nil {
				mod = append(mod, *tc.l3)
			}
			mod = append(mod, lines[3:]...)
			bad := []byte(strings.Join(mod, ""))
			if bytes.Equal(bad, data) {
				t.Fatal("test did not change the file")
			}
			_, err := archive.VerifyChain(bytes.NewReader(bad))
			var le *archive.LineError
			if !errors.As(err, &le) || le.Line != tc.line || !errors.Is(err, tc.kind) {
				t.Fatalf("VerifyChain: %v; want line %d, %v", err, tc.line, tc.kind)
			}
			_, err = archive.Import(ctx(t), dst.JS, bytes.NewReader(bad), archive.ImportOptions{})
			if !errors.Is(err, archive.ErrRefused) || !errors.As(err, &le) || le.Line != tc.line {
				t.Fatalf("Import: %v; want refused naming line %d", err, tc.line)
			}
			if !strings.Contains(err.Error(), "line "+strconv.Itoa(tc.line)) {
				t.Fatalf("Import error does not name the line: %v", err)
			}
			if msgs, _, marker := streamInfo(t, dst); msgs != 0 || marker != 0 {
				t.Fatalf("refused import wrote %d messages (marker %d)", msgs, marker)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestImportAppend: a non-empty stream is refused without Append; with it
// the file is appended with offset sequences and keeps its original times.
func TestImportAppend(t *testing.T) {
	src := opsrig.New(t)
	src.AppendOne(t, "", opsrig.Env("a1", "alice", "mcp/proposal", nil, `{"method":"m","params":{},"ttl_ms":60000}`))
	src.AppendOne(t, "", opsrig.Env("a1-f", "bob", "mcp/request", []string{"a1"}, `{"method":"m","params":{}}`))
	src.AppendOne(t, "", opsrig.Env("a2", "alice", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	data, sum := export(t, src, archive.ExportOptions{})
	orig, err := src.Fold(t, 0).Get("default", "a1")
	if err != nil {
		t.Fatal(err)
	}

	dst := opsrig.New(t)
	time.Sleep(20 * time.Millisecond)
	dst.AppendOne(t, "", opsrig.Env("b1", "carol", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	dst.AppendOne(t, "", opsrig.Env("b2", "carol", "mcp/proposal", nil, `{"method":"m","params":{}}`))

	_, err = archive.Import(ctx(t), dst.JS, bytes.NewReader(data), archive.ImportOptions{})
	if !errors.Is(err, archive.ErrNotEmpty) {
		t.Fatalf("import into a non-empty stream: %v, want ErrNotEmpty", err)
	}
	if msgs, _, _ := streamInfo(t, dst); msgs != 2 {
		t.Fatalf("refused import wrote: %d messages", msgs)
	}

	res, err := archive.Import(ctx(t), dst.JS, bytes.NewReader(data), archive.ImportOptions{Append: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstSeq != 3 || res.LastSeq != 5 || res.Offset != 2 || res.Imported != sum.Lines {
		t.Fatalf("append result %+v", res)
	}
	if _, last, marker := streamInfo(t, dst); last != 5 || marker != 5 {
		t.Fatalf("last %d marker %d, want 5 5", last, marker)
	}
	s := dst.Fold(t, 0)
	p, err := s.Get("default", "a1")
	if err != nil {
		t.Fatal(err)
	}
	if !p.CreatedAt.Equal(orig.CreatedAt) || !p.ExpiresAt.Equal(*orig.ExpiresAt) || p.CreatedSeq != orig.CreatedSeq+2 || p.State != api.StateFulfilled {
		t.Fatalf("appended a1: %+v\noriginal: %+v", p, orig)
	}
	if b1, err := s.Get("default", "b1"); err != nil || b1.CreatedSeq != 1 {
		t.Fatalf("b1: %+v %v", b1, err)
	}

	// The same file again within the duplicate window: refused loudly,
	// not silently skipped.
	_, err = archive.Import(ctx(t), dst.JS, bytes.NewReader(data), archive.ImportOptions{Append: true})
	if !errors.Is(err, archive.ErrConcurrentWrite) || !strings.Contains(err.Error(), "already imported") {
		t.Fatalf("second import: %v", err)
	}
	if _, last, marker := streamInfo(t, dst); last != 5 || marker != 5 {
		t.Fatalf("after the refused second import: last %d marker %d", last, marker)
	}
}

// TestImportRefusesUnsafeStreams: a forged original-time header after the
// marker, a running projector, and a range export into an empty stream.
func TestImportRefusesUnsafeStreams(t *testing.T) {
	src := opsrig.New(t)
	for i := range 4 {
		src.AppendOne(t, "", opsrig.Env("p"+strconv.Itoa(i), "alice", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	}
	data, _ := export(t, src, archive.ExportOptions{})
	rng, rsum := export(t, src, archive.ExportOptions{FromSeq: 2, ToSeq: 3})
	if rsum.Lines != 2 || rsum.FirstSeq != 2 || rsum.LastSeq != 3 {
		t.Fatalf("range export %+v", rsum)
	}
	if _, err := archive.VerifyChain(bytes.NewReader(rng)); err != nil {
		t.Fatalf("a range export verifies on its own: %v", err)
	}
	if _, err := archive.Export(ctx(t), src.JS, io.Discard, archive.ExportOptions{ToSeq: 99}); !errors.Is(err, archive.ErrBeyondLog) {
		t.Fatalf("export beyond the log: %v", err)
	}

	dst := opsrig.New(t)
	if _, err := archive.Import(ctx(t), dst.JS, bytes.NewReader(rng), archive.ImportOptions{}); !errors.Is(err, archive.ErrNotReproducible) {
		t.Fatalf("range into an empty stream: %v", err)
	}

	// An agent forges the header on a live append.
	m := nats.NewMsg(subjects.Event{Space: "default", Key: "x", Type: "proposal", Sender: "mallory"}.String())
	m.Header.Set(ledger.HeaderOriginalTime, "2001-01-01T00:00:00Z")
	m.Data = []byte(opsrig.Env("x", "mallory", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	if _, err := dst.JS.PublishMsg(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.Import(ctx(t), dst.JS, bytes.NewReader(data), archive.ImportOptions{Append: true}); !errors.Is(err, archive.ErrForeignTime) || !strings.Contains(err.Error(), "seq 1") {
		t.Fatalf("append over a forged header: %v", err)
	}

	// A projector waiting for messages.
	other := opsrig.New(t)
	store := opsrig.OpenStore(t, "")
	p, err := projector.New(other.JS, store, projector.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// Wait until it has a pull request waiting, as a running projector does.
	stream, err := other.JS.Stream(ctx(t), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := testctx.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		c, err := stream.Consumer(ctx(t), projector.DefaultDurable)
		if err == nil {
			if ci, err := c.Info(ctx(t)); err == nil && ci.NumWaiting > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the projector never waited for messages")
		}
	}
	_, err = archive.Import(ctx(t), other.JS, bytes.NewReader(data), archive.ImportOptions{})
	if !errors.Is(err, archive.ErrActiveConsumers) || !strings.Contains(err.Error(), projector.DefaultDurable) {
		t.Fatalf("import with a projector running: %v", err)
	}
}

// TestImportConcurrentWriterFailsLoudly: a message appended by someone else
// between two batches stops the import; the marker covers exactly what the
// import wrote.
func TestImportConcurrentWriterFailsLoudly(t *testing.T) {
	src := opsrig.New(t)
	for i := range 6 {
		src.AppendOne(t, "", opsrig.Env("p"+strconv.Itoa(i), "alice", "mcp/proposal", nil, `{"method":"m","params":{}}`))
	}
	data, _ := export(t, src, archive.ExportOptions{})
	dst := opsrig.New(t)
	injected := false
	res, err := archive.Import(ctx(t), dst.JS, bytes.NewReader(data), archive.ImportOptions{BatchSize: 2, Progress: func(done, _ uint64) {
		if done == 2 && !injected {
			injected = true
			dst.AppendOne(t, "", opsrig.Env("intruder", "mallory", "mcp/proposal", nil, `{"method":"m","params":{}}`))
		}
	}})
	if !errors.Is(err, archive.ErrConcurrentWrite) || !strings.Contains(err.Error(), "stream seq 3") {
		t.Fatalf("import with a concurrent writer: %v", err)
	}
	t.Log(err)
	if res.Imported != 2 || res.LastSeq != 2 {
		t.Fatalf("result %+v, want 2 imported", res)
	}
	if msgs, last, marker := streamInfo(t, dst); msgs != 3 || last != 3 || marker != 2 {
		t.Fatalf("stream: %d msgs, last %d, marker %d; want 3, 3, 2", msgs, last, marker)
	}
}
