package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// --- helpers ---------------------------------------------------------------

func openMemStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openDirStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := OpenStore(StoreOptions{Dir: dir, MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatalf("OpenStore(%s): %v", dir, err)
	}
	return s
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mkProp(space, id string, seq uint64, st api.ProposalState, proposer string, to ...string) *api.Proposal {
	at := t0.Add(time.Duration(seq) * time.Second)
	return &api.Proposal{
		ID: id, Space: space, State: st, Proposer: proposer, To: to,
		Method: "tools/call", Params: json.RawMessage(`{"name":"write_file"}`),
		Dialect: ledger.DialectMEW04, Kind: ledger.KindProposal,
		CreatedSeq: seq, CreatedAt: at, UpdatedSeq: seq, UpdatedAt: at,
		Rejections: []api.Rejection{}, Fulfillments: []api.Fulfillment{}, Anomalies: []string{}, Events: 1,
	}
}

func mustCommit(t testing.TB, b *Batch, seq uint64) {
	t.Helper()
	if err := b.Commit(seq); err != nil {
		t.Fatalf("Commit(%d): %v", seq, err)
	}
}

func putAll(t testing.TB, s *Store, seq uint64, ps ...*api.Proposal) {
	t.Helper()
	b := s.NewBatch()
	for _, p := range ps {
		if err := b.PutProposal(p); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit(t, b, seq)
}

func ids(ps []*api.Proposal) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func listIDs(t testing.TB, s *Store, q ListQuery) []string {
	t.Helper()
	pg, err := s.List(q)
	if err != nil {
		t.Fatalf("List(%+v): %v", q, err)
	}
	return ids(pg.Proposals)
}

// listAll pages through q until NextCursor is empty.
func listAll(t testing.TB, s *Store, q ListQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("List(%+v): cursor does not end", q)
		}
		pg, err := s.List(q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		out = append(out, ids(pg.Proposals)...)
		if pg.NextCursor == "" {
			return out
		}
		if pg.NextCursor == q.Cursor {
			t.Fatalf("List(%+v): cursor did not advance", q)
		}
		q.Cursor = pg.NextCursor
	}
}

func dump(t testing.TB, s *Store) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Dump(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// --- keys ------------------------------------------------------------------

func TestStoreKeysEscapeRoundTripAndOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	alphabet := []byte{0x00, 0x01, 0xFF, 'a', 'b', '/', '.'}
	gen := func() string {
		b := make([]byte, r.Intn(6))
		for i := range b {
			b[i] = alphabet[r.Intn(len(alphabet))]
		}
		return string(b)
	}
	for i := 0; i < 5000; i++ {
		a, b := gen(), gen()
		ea, eb := appendEsc(nil, a), appendEsc(nil, b)
		got, rest, err := readEsc(append(ea, 'x'))
		if err != nil || got != a || string(rest) != "x" {
			t.Fatalf("readEsc(esc(%q)) = %q, %q, %v", a, got, rest, err)
		}
		if c1, c2 := bytes.Compare(ea, eb), strings.Compare(a, b); c1 != c2 {
			t.Fatalf("order of %q, %q: escaped %d, raw %d", a, b, c1, c2)
		}
		if a != b && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("escaped %q and %q: one is a prefix of the other", a, b)
		}
		// Two-component keys never collide.
		c, d := gen(), gen()
		if (a != c || b != d) && bytes.Equal(proposalKey(a, b), proposalKey(c, d)) {
			t.Fatalf("proposalKey(%q,%q) == proposalKey(%q,%q)", a, b, c, d)
		}
	}
	for _, bad := range [][]byte{{'a'}, {'a', 0x00}, {'a', 0x00, 0x02}} {
		if _, _, err := readEsc(bad); err == nil {
			t.Fatalf("readEsc(%q): no error", bad)
		}
	}
	seq, id, err := decodeCursor(encodeCursor(42, "a\x00/b"))
	if err != nil || seq != 42 || id != "a\x00/b" {
		t.Fatalf("cursor round trip: %d %q %v", seq, id, err)
	}
	for _, c := range []string{"!!", "AA", encodeCursor(1, "x")[1:]} {
		if _, _, err := decodeCursor(c); !errors.Is(err, ErrBadQuery) {
			t.Fatalf("decodeCursor(%q) = %v, want ErrBadQuery", c, err)
		}
	}
	// Deadlines sort numerically, negative (pre-1970) ones included.
	for _, pair := range [][2]int64{{-5, 3}, {-1 << 62, -1}, {0, 1}, {1, 1 << 62}} {
		if bytes.Compare(deadlineKey(pair[0], "s", "a"), deadlineKey(pair[1], "s", "a")) >= 0 {
			t.Fatalf("deadline %d does not sort before %d", pair[0], pair[1])
		}
	}
	n, sp, pid, err := readDeadlineKey(deadlineKey(-7, "s\x00", "i"))
	if err != nil || n != -7 || sp != "s\x00" || pid != "i" {
		t.Fatalf("readDeadlineKey: %d %q %q %v", n, sp, pid, err)
	}
}

func TestStoreOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o  StoreOptions
		ok bool
	}{
		{StoreOptions{}, false},
		{StoreOptions{Dir: "x"}, true},
		{StoreOptions{FS: vfs.NewMem()}, true},
		{StoreOptions{Dir: "x", MemTableSize: 4 << 30}, false},
		{StoreOptions{Dir: "x", CacheSize: -1}, false},
	} {
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.o, err, tc.ok)
		}
	}
	if _, err := OpenStore(StoreOptions{}); err == nil {
		t.Fatal("OpenStore without Dir or FS: no error")
	}
}

// --- overlay ---------------------------------------------------------------

func TestStoreBatchReadYourWritesAndDeletes(t *testing.T) {
	s := openMemStore(t)
	// Committed base state.
	b := s.NewBatch()
	base := mkProp("sp", "p1", 1, api.StatePending, "alice", "bob")
	must(t, b.PutProposal(base))
	must(t, b.PutEventRef("sp", "p1", &fold.EventRef{Seq: 1, Type: ledger.TypeProposal, Status: fold.EventApplied, Proposals: []string{"p1"}}))
	must(t, b.PutOrphans("sp", "ghost", []fold.Orphan{{Seq: 1, Target: "ghost"}}))
	must(t, b.PutHistory("sp", "p1", &api.HistoryEntry{Seq: 1, ID: "p1", Effect: api.EffectApplied}))
	must(t, b.PutHistory("sp", "ghost", &api.HistoryEntry{Seq: 1, ID: "f1", Effect: api.EffectOrphan}))
	st := api.NewStats()
	st.Proposals = 1
	must(t, b.PutStats("sp", st))
	if b.Len() != 6 {
		t.Fatalf("Len = %d, want 6", b.Len())
	}
	mustCommit(t, b, 1)

	b = s.NewBatch()
	defer b.Discard()
	// Reads fall through to Pebble.
	p, err := b.Proposal("sp", "p1")
	if err != nil || p == nil || p.Proposer != "alice" {
		t.Fatalf("Proposal = %+v, %v", p, err)
	}
	if p, _ := b.Proposal("sp", "nope"); p != nil {
		t.Fatalf("absent proposal = %+v", p)
	}
	if st, _ := b.Stats("other"); st != nil {
		t.Fatalf("absent stats = %+v, want nil", st)
	}
	if b.Len() != 0 {
		t.Fatalf("reads made %d records dirty", b.Len())
	}
	// Writes are read back.
	p2 := p.Clone()
	p2.State, p2.DecidedBy = api.StateFulfilled, "carol"
	must(t, b.PutProposal(p2))
	if got, _ := b.Proposal("sp", "p1"); got != p2 {
		t.Fatalf("Proposal after put = %+v, want the put value", got)
	}
	if got, _ := s.Get("sp", "p1"); got.State != api.StatePending {
		t.Fatalf("uncommitted write visible in the store: %s", got.State)
	}
	// Deleting an orphan list that exists only in Pebble hides it.
	if o, _ := b.Orphans("sp", "ghost"); len(o) != 1 {
		t.Fatalf("orphans = %+v", o)
	}
	must(t, b.PutOrphans("sp", "ghost", []fold.Orphan{}))
	if o, _ := b.Orphans("sp", "ghost"); o != nil {
		t.Fatalf("orphans after delete = %+v, want nil", o)
	}
	must(t, b.DeleteHistory("sp", "ghost", 1))
	must(t, b.PutHistory("sp", "p1", &api.HistoryEntry{Seq: 2, ID: "f1", Effect: api.EffectApplied}))
	ref := &fold.EventRef{Seq: 2, Type: ledger.TypeFulfil, Status: fold.EventApplied, Proposals: []string{"p1"}}
	must(t, b.PutEventRef("sp", "f1", ref))
	if got, _ := b.EventRef("sp", "f1"); got != ref {
		t.Fatalf("EventRef after put = %+v", got)
	}
	st2, _ := b.Stats("sp")
	st2 = st2.Clone()
	st2.Events = 2
	must(t, b.PutStats("sp", st2))
	if got, _ := b.Stats("sp"); got.Events != 2 {
		t.Fatalf("Stats after put = %+v", got)
	}
	// A record is read from Pebble once: later commits by someone else are
	// not seen (the overlay remembers absence too).
	other := s.NewBatch()
	must(t, other.PutProposal(mkProp("sp", "nope", 2, api.StatePending, "zed")))
	mustCommit(t, other, 2)
	if p, _ := b.Proposal("sp", "nope"); p != nil {
		t.Fatal("overlay re-read Pebble for a record it had already read")
	}
	if b.Len() != 6 {
		t.Fatalf("Len = %d, want 6", b.Len())
	}
	mustCommit(t, b, 3)

	if got, _ := s.Get("sp", "p1"); got.State != api.StateFulfilled || got.DecidedBy != "carol" {
		t.Fatalf("after commit: %+v", got)
	}
	if _, err := s.History("sp", "ghost"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted history: %v", err)
	}
	h, _ := s.History("sp", "p1")
	if len(h) != 2 || h[0].Seq != 1 || h[1].Seq != 2 {
		t.Fatalf("history = %+v", h)
	}
	b = s.NewBatch()
	defer b.Discard()
	if o, _ := b.Orphans("sp", "ghost"); o != nil {
		t.Fatalf("orphans after commit = %+v", o)
	}
	if got, _ := b.EventRef("sp", "f1"); got == nil || got.Type != ledger.TypeFulfil || !slices.Equal(got.Proposals, []string{"p1"}) {
		t.Fatalf("event ref after commit = %+v", got)
	}
	if got, _ := s.Stats("sp"); got.Events != 2 || got.Proposals != 1 {
		t.Fatalf("stats after commit = %+v", got)
	}
	if got, _ := s.Stats("none"); !reflect.DeepEqual(got, api.NewStats()) {
		t.Fatalf("stats of an empty space = %+v", got)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoreBatchLifecycle(t *testing.T) {
	s := openMemStore(t)
	b := s.NewBatch()
	must(t, b.PutProposal(mkProp("sp", "a", 1, api.StatePending, "x")))
	mustCommit(t, b, 1)
	if err := b.PutProposal(mkProp("sp", "b", 2, api.StatePending, "x")); !errors.Is(err, ErrBatchDone) {
		t.Fatalf("put after commit: %v", err)
	}
	if _, err := b.Proposal("sp", "a"); !errors.Is(err, ErrBatchDone) {
		t.Fatalf("read after commit: %v", err)
	}
	if err := b.Commit(2); !errors.Is(err, ErrBatchDone) {
		t.Fatalf("second commit: %v", err)
	}
	must(t, b.Close())

	b = s.NewBatch()
	must(t, b.PutProposal(mkProp("sp", "b", 1, api.StatePending, "x")))
	if err := b.Commit(1); !errors.Is(err, ErrStaleCommit) {
		t.Fatalf("commit at the applied seq with writes: %v", err)
	}
	if _, err := s.Get("sp", "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stale commit wrote: %v", err)
	}
	if err := s.NewBatch().Commit(1); err != nil {
		t.Fatalf("empty commit at the applied seq: %v", err)
	}
	if err := s.NewBatch().Commit(0); !errors.Is(err, ErrStaleCommit) {
		t.Fatalf("commit below the applied seq: %v", err)
	}
	// An empty batch still moves the checkpoint.
	mustCommit(t, s.NewBatch(), 5)
	if s.AppliedSeq() != 5 {
		t.Fatalf("AppliedSeq = %d", s.AppliedSeq())
	}
	// Put with mismatched key is impossible by construction; nil values are refused.
	b = s.NewBatch()
	defer b.Discard()
	if err := b.PutProposal(nil); err == nil {
		t.Fatal("PutProposal(nil): no error")
	}
	if err := b.PutEventRef("sp", "e", nil); err == nil {
		t.Fatal("PutEventRef(nil): no error")
	}
}

// --- durability --------------------------------------------------------------

func TestStoreCommitIsAtomicWithCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := openDirStore(t, dir)
	putAll(t, s, 7, mkProp("sp", "a", 3, api.StatePending, "x", "y"), mkProp("sp", "b", 7, api.StateRejected, "x"))
	before := dump(t, s)

	// An uncommitted batch leaves nothing, even across a reopen.
	b := s.NewBatch()
	must(t, b.PutProposal(mkProp("sp", "c", 8, api.StatePending, "x")))
	must(t, b.PutHistory("sp", "c", &api.HistoryEntry{Seq: 8}))
	must(t, s.Close())
	must(t, s.Close()) // twice is fine
	if err := b.Commit(8); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit on a closed store: %v", err)
	}

	s = openDirStore(t, dir)
	defer s.Close()
	if s.AppliedSeq() != 7 {
		t.Fatalf("AppliedSeq after reopen = %d, want 7", s.AppliedSeq())
	}
	if got := dump(t, s); got != before {
		t.Fatalf("store changed across close/reopen:\n%s\nvs\n%s", got, before)
	}
	p, err := s.Get("sp", "b")
	if err != nil || p.State != api.StateRejected {
		t.Fatalf("Get after reopen: %+v %v", p, err)
	}
	if _, err := s.Get("sp", "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("uncommitted proposal after reopen: %v", err)
	}
	if !strings.Contains(before, strconv.Quote("\x01checkpoint")+" "+strconv.Quote("\x00\x00\x00\x00\x00\x00\x00\x07")) {
		t.Fatalf("dump has no checkpoint 7:\n%s", before)
	}
}

// --- indexes ---------------------------------------------------------------

func TestStoreIndexDiffOnStateChange(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("readFirst=%v", readFirst), func(t *testing.T) {
			s := openMemStore(t)
			exp := t0.Add(time.Hour)
			p := mkProp("sp", "p", 1, api.StatePending, "alice", "bob", "carol")
			p.ExpiresAt = &exp
			p.Kernel = &api.Kernel{ActionType: api.ActionWrite, Target: &api.KernelTarget{ResourceType: "file", Domain: "fs"}}
			putAll(t, s, 1, p, mkProp("sp", "q", 2, api.StatePending, "alice"))

			if got := listIDs(t, s, ListQuery{Space: "sp", State: api.StatePending}); !slices.Equal(got, []string{"q", "p"}) {
				t.Fatalf("pending = %v", got)
			}
			due, err := s.DueExpiries(exp, 10)
			if err != nil || len(due) != 1 || due[0].Space != "sp" || due[0].ID != "p" || !due[0].Deadline.Equal(exp) {
				t.Fatalf("DueExpiries(at deadline) = %+v, %v", due, err)
			}
			if due, _ := s.DueExpiries(exp.Add(-1), 10); len(due) != 0 {
				t.Fatalf("DueExpiries(before deadline) = %+v", due)
			}

			b := s.NewBatch()
			cur := p
			if readFirst {
				cur, err = b.Proposal("sp", "p")
				must(t, err)
			}
			np := cur.Clone()
			np.State, np.DecidedBy, np.UpdatedSeq = api.StateFulfilled, "bob", 3
			np.To = []string{"bob"} // a member leaves: its target index entry goes
			np.Anomalies = []string{api.AnomalySelfFulfilled}
			must(t, b.PutProposal(np))
			mustCommit(t, b, 3)

			if got := listIDs(t, s, ListQuery{Space: "sp", State: api.StatePending}); !slices.Equal(got, []string{"q"}) {
				t.Fatalf("pending after fulfil = %v", got)
			}
			if got := listIDs(t, s, ListQuery{Space: "sp", State: api.StateFulfilled}); !slices.Equal(got, []string{"p"}) {
				t.Fatalf("fulfilled after fulfil = %v", got)
			}
			if got := listIDs(t, s, ListQuery{Space: "sp", Target: "carol"}); len(got) != 0 {
				t.Fatalf("target carol after it left = %v", got)
			}
			if got := listIDs(t, s, ListQuery{Space: "sp", Anomaly: api.AnomalySelfFulfilled}); !slices.Equal(got, []string{"p"}) {
				t.Fatalf("anomaly = %v", got)
			}
			if due, _ := s.DueExpiries(exp.Add(time.Hour), 10); len(due) != 0 {
				t.Fatalf("deadline entry left after fulfil: %+v", due)
			}
			// The index holds exactly the new version's entries.
			var a arena
			want := len(a.indexEntries(nil, np)) + len(a.indexEntries(nil, mkProp("sp", "q", 2, api.StatePending, "alice")))
			got := 0
			for _, line := range strings.Split(dump(t, s), "\n") {
				if strings.HasPrefix(line, `"I`) || strings.HasPrefix(line, `"D`) {
					got++
				}
			}
			if got != want {
				t.Fatalf("index entries = %d, want %d:\n%s", got, want, dump(t, s))
			}
		})
	}
}

func TestStoreDueExpiriesOrderAndLimit(t *testing.T) {
	s := openMemStore(t)
	var ps []*api.Proposal
	for i := 0; i < 10; i++ {
		p := mkProp("sp", fmt.Sprintf("p%d", i), uint64(i+1), api.StatePending, "x")
		e := t0.Add(time.Duration(10-i) * time.Minute) // later proposals expire sooner
		p.ExpiresAt = &e
		ps = append(ps, p)
	}
	far := mkProp("sp", "far", 11, api.StatePending, "x")
	farT := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) // beyond int64 nanos: clamped
	far.ExpiresAt = &farT
	ps = append(ps, far, mkProp("sp", "none", 12, api.StatePending, "x"))
	putAll(t, s, 12, ps...)
	due, err := s.DueExpiries(t0.Add(5*time.Minute), 3)
	must(t, err)
	if got := []string{due[0].ID, due[1].ID, due[2].ID}; len(due) != 3 || !slices.Equal(got, []string{"p9", "p8", "p7"}) {
		t.Fatalf("due = %+v", due)
	}
	if all, _ := s.DueExpiries(t0.Add(24*time.Hour), 0); len(all) != 10 {
		t.Fatalf("all due = %d, want 10", len(all))
	}
	if all, _ := s.DueExpiries(farT, 0); len(all) != 11 {
		t.Fatalf("due at year 9999 = %d, want 11", len(all))
	}
}

// --- List --------------------------------------------------------------------

// listModel is the brute-force answer to a ListQuery.
func listModel(all []*api.Proposal, q ListQuery) []string {
	var out []*api.Proposal
	for _, p := range all {
		if p.Space != q.Space ||
			(q.State != "" && p.State != q.State) ||
			(q.Proposer != "" && p.Proposer != q.Proposer) ||
			(q.Target != "" && !slices.Contains(p.To, q.Target)) ||
			(q.Anomaly != "" && !p.HasAnomaly(q.Anomaly)) ||
			(!q.Since.IsZero() && p.CreatedAt.Before(q.Since)) ||
			(!q.Until.IsZero() && !p.CreatedAt.Before(q.Until)) {
			continue
		}
		if q.ActionType != "" || q.ResourceType != "" || q.Domain != "" {
			k := p.Kernel
			if k == nil || (q.ActionType != "" && string(k.ActionType) != q.ActionType) {
				continue
			}
			if (q.ResourceType != "" || q.Domain != "") && k.Target == nil {
				continue
			}
			if (q.ResourceType != "" && k.Target.ResourceType != q.ResourceType) || (q.Domain != "" && k.Target.Domain != q.Domain) {
				continue
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedSeq != out[j].CreatedSeq {
			return out[i].CreatedSeq > out[j].CreatedSeq
		}
		return out[i].ID < out[j].ID
	})
	return ids(out)
}

func genProposals(r *rand.Rand, n int, seq0 uint64, space string) []*api.Proposal {
	agents := []string{"alice", "bob", "carol", "dave", "a\x00b"}
	var out []*api.Proposal
	for i := 0; i < n; i++ {
		seq := seq0 + uint64(i)
		st := api.States[r.Intn(len(api.States))]
		var to []string
		for _, a := range agents {
			if r.Intn(3) == 0 {
				to = append(to, a)
			}
		}
		p := mkProp(space, fmt.Sprintf("p%03d", seq), seq, st, agents[r.Intn(len(agents))], to...)
		// Times are not monotonic in seq: List must not rely on it.
		p.CreatedAt = t0.Add(time.Duration(r.Intn(1000)) * time.Second)
		if r.Intn(4) == 0 {
			p.Anomalies = []string{api.AnomalyTargetMismatch}
			if r.Intn(2) == 0 {
				p.Anomalies = append(p.Anomalies, api.AnomalySelfFulfilled)
			}
		}
		if r.Intn(3) == 0 {
			k := &api.Kernel{ActionType: []api.ActionType{api.ActionRead, api.ActionWrite}[r.Intn(2)]}
			if r.Intn(3) > 0 {
				k.Target = &api.KernelTarget{ResourceType: []string{"file", "db"}[r.Intn(2)], Domain: []string{"fs", "prod"}[r.Intn(2)]}
			}
			p.Kernel = k
		}
		out = append(out, p)
	}
	return out
}

func TestStoreListMatchesModel(t *testing.T) {
	s := openMemStore(t)
	r := rand.New(rand.NewSource(7))
	all := genProposals(r, 300, 1, "sp")
	other := genProposals(r, 50, 1000, "other") // another space never leaks in
	// Two proposals share a created_seq: the id breaks the tie.
	twin := mkProp("sp", "twin", 5, api.StatePending, "alice")
	all = append(all, twin)
	for i := 0; i < len(all); i += 64 {
		putAll(t, s, uint64(i+1), all[i:min(i+64, len(all))]...)
	}
	putAll(t, s, 2000, other...)

	since, until := t0.Add(200*time.Second), t0.Add(700*time.Second)
	queries := []ListQuery{
		{},
		{State: api.StatePending}, {State: api.StateFulfilled}, {Proposer: "carol"}, {Proposer: "a\x00b"},
		{Target: "bob"}, {Target: "a\x00b"}, {Target: "nobody"}, {Anomaly: api.AnomalyTargetMismatch},
		{ActionType: "write"}, {ResourceType: "db"}, {Domain: "fs"},
		{Since: since}, {Until: until}, {Since: since, Until: until},
		{State: api.StatePending, Proposer: "alice"},
		{State: api.StateRejected, Target: "carol", Since: since},
		{Proposer: "bob", Target: "bob", Anomaly: api.AnomalySelfFulfilled},
		{ActionType: "read", ResourceType: "file", Domain: "prod"},
		{State: api.StateWithdrawn, Target: "dave", Until: until, Domain: "fs"},
	}
	for _, q := range queries {
		q.Space = "sp"
		want := listModel(all, q)
		for _, limit := range []int{1, 7, 1000} {
			q.Limit = limit
			got := listAll(t, s, q)
			if !slices.Equal(got, want) {
				t.Fatalf("List(%+v):\n got %v\nwant %v", q, got, want)
			}
			// MaxScan: short pages with cursors, same answer.
			q.MaxScan = 5
			if got := listAll(t, s, q); !slices.Equal(got, want) {
				t.Fatalf("List(%+v) with MaxScan:\n got %v\nwant %v", q, got, want)
			}
			q.MaxScan = 0
		}
		// The first page is the newest, and is full when it can be.
		q.Limit = 10
		pg, err := s.List(q)
		must(t, err)
		if n := min(10, len(want)); !slices.Equal(ids(pg.Proposals), want[:n]) || (pg.NextCursor != "") != (len(want) > 10) {
			t.Fatalf("first page of %+v = %v (next %q), want %v", q, ids(pg.Proposals), pg.NextCursor, want[:n])
		}
	}
	// The default limit.
	if pg, _ := s.List(ListQuery{Space: "sp"}); len(pg.Proposals) != DefaultListLimit {
		t.Fatalf("default page = %d proposals", len(pg.Proposals))
	}
	for _, q := range []ListQuery{{}, {Space: "sp", State: "bogus"}, {Space: "sp", Cursor: "%%"}} {
		if _, err := s.List(q); !errors.Is(err, ErrBadQuery) {
			t.Fatalf("List(%+v) = %v, want ErrBadQuery", q, err)
		}
	}
	if pg, err := s.List(ListQuery{Space: "nope"}); err != nil || len(pg.Proposals) != 0 || pg.NextCursor != "" {
		t.Fatalf("empty space: %+v %v", pg, err)
	}
}

func TestStoreListCursorStableUnderAppends(t *testing.T) {
	s := openMemStore(t)
	r := rand.New(rand.NewSource(3))
	initial := genProposals(r, 100, 1, "sp")
	for _, p := range initial {
		p.State = api.StatePending
	}
	putAll(t, s, 100, initial...)
	want := listModel(initial, ListQuery{Space: "sp", State: api.StatePending})

	q := ListQuery{Space: "sp", State: api.StatePending, Limit: 9}
	var got []string
	seq := uint64(101)
	for {
		pg, err := s.List(q)
		must(t, err)
		got = append(got, ids(pg.Proposals)...)
		if pg.NextCursor == "" {
			break
		}
		q.Cursor = pg.NextCursor
		// Newer proposals arrive between pages, some in between existing ids
		// lexically; they are newer than the cursor, so never seen.
		putAll(t, s, seq, mkProp("sp", fmt.Sprintf("new%d", seq), seq, api.StatePending, "alice"),
			mkProp("sp", fmt.Sprintf("p%03d-late", seq), seq+1, api.StatePending, "bob"))
		seq += 2
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged with appends:\n got %v\nwant %v", got, want)
	}
}

// --- history, spaces ---------------------------------------------------------

func TestStoreHistoryOrderAndIsolation(t *testing.T) {
	s := openMemStore(t)
	seqs := []uint64{9, 1, 300, 2, 256, 70000}
	for i, seq := range seqs {
		b := s.NewBatch()
		must(t, b.PutHistory("sp", "a", &api.HistoryEntry{Seq: seq, ID: fmt.Sprint("e", seq), Effect: api.EffectRecorded}))
		// Keys that start with "a" or contain terminator bytes are separate.
		must(t, b.PutHistory("sp", "a\x00", &api.HistoryEntry{Seq: seq, ID: "x"}))
		must(t, b.PutHistory("sp", "ab", &api.HistoryEntry{Seq: seq, ID: "y"}))
		must(t, b.PutHistory("sp\x00", "a", &api.HistoryEntry{Seq: seq, ID: "z"}))
		mustCommit(t, b, uint64(i+1))
	}
	h, err := s.History("sp", "a")
	must(t, err)
	var got []uint64
	for _, e := range h {
		if !strings.HasPrefix(e.ID, "e") {
			t.Fatalf("history of a holds %+v", e)
		}
		got = append(got, e.Seq)
	}
	want := slices.Clone(seqs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("history seqs = %v, want %v", got, want)
	}
	if _, err := s.History("sp", "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History of nothing: %v", err)
	}
	sp, err := s.Spaces()
	must(t, err)
	if !slices.Equal(sp, []string{"sp", "sp\x00"}) {
		t.Fatalf("Spaces = %q", sp)
	}
}

// --- determinism -------------------------------------------------------------

// feed writes the same logical content through batches, putting records in
// an order given by r and splitting batches at the given sizes.
func feed(t *testing.T, s *Store, r *rand.Rand, batchSize int) {
	gen := genProposals(rand.New(rand.NewSource(11)), 120, 1, "sp")
	type op func(b *Batch) error
	var ops []op
	for _, p := range gen {
		p := p
		ops = append(ops,
			func(b *Batch) error { return b.PutProposal(p) },
			func(b *Batch) error {
				return b.PutHistory(p.Space, p.ID, &api.HistoryEntry{Seq: p.CreatedSeq, ID: p.ID, Effect: api.EffectApplied})
			},
			func(b *Batch) error {
				return b.PutEventRef(p.Space, p.ID, &fold.EventRef{Seq: p.CreatedSeq, Status: fold.EventApplied, Proposals: []string{p.ID}})
			},
		)
	}
	var last uint64
	for i := 0; i < len(ops); i += batchSize {
		chunk := slices.Clone(ops[i:min(i+batchSize, len(ops))])
		r.Shuffle(len(chunk), func(a, b int) { chunk[a], chunk[b] = chunk[b], chunk[a] })
		b := s.NewBatch()
		for _, o := range chunk {
			must(t, o(b))
		}
		last = uint64(i/batchSize + 1)
		if i+batchSize >= len(ops) {
			last = 1000
		}
		mustCommit(t, b, last)
	}
	// Later: every pending proposal is decided, stats written, read-modify-write.
	b := s.NewBatch()
	st := api.NewStats()
	for _, p := range gen {
		cur, err := b.Proposal(p.Space, p.ID)
		must(t, err)
		if cur.State == api.StatePending {
			c := cur.Clone()
			c.State = api.StateExpired
			must(t, b.PutProposal(c))
		}
		st.Proposals++
	}
	must(t, b.PutStats("sp", st))
	mustCommit(t, b, 1001)
}

func TestStoreDigestIndependentOfWriteOrderAndBatching(t *testing.T) {
	a, b := openMemStore(t), openMemStore(t)
	feed(t, a, rand.New(rand.NewSource(1)), 1000)
	feed(t, b, rand.New(rand.NewSource(2)), 17)
	da, db := dump(t, a), dump(t, b)
	if da != db {
		t.Fatalf("dumps differ (%d vs %d bytes)", len(da), len(db))
	}
	ga, err := a.Digest()
	must(t, err)
	gb, err := b.Digest()
	must(t, err)
	if ga != gb || len(ga) != 64 {
		t.Fatalf("digests %s vs %s", ga, gb)
	}
	// And a real change changes the digest.
	putAll(t, b, 1002, mkProp("sp", "extra", 1002, api.StatePending, "x"))
	if gb2, _ := b.Digest(); gb2 == ga {
		t.Fatal("digest did not change")
	}
}

// --- waiting and closing -------------------------------------------------------

// TestCheckpointWait: a waiter wakes at the commit that reaches its
// sequence (not at an earlier one), at its context's deadline, and at
// close. In a synctest bubble: "not woken" is checked once every
// goroutine is blocked, and the deadline passes on the bubble's clock.
func TestCheckpointWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCheckpoint()
		ctx := context.Background()
		must(t, c.wait(ctx, 0)) // already there

		done := make(chan error, 1)
		go func() { done <- c.wait(ctx, 3) }()
		c.publish(2)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("woke at seq 2: %v", err)
		default:
		}
		c.publish(3)
		synctest.Wait()
		select {
		case err := <-done:
			must(t, err)
		default:
			t.Fatal("wait did not wake on the commit of its sequence")
		}

		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := c.wait(cctx, 10); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("wait with a 30ms timeout = %v after %v", err, time.Since(start))
		}

		go func() { done <- c.wait(ctx, 100) }()
		synctest.Wait()
		c.close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("wait on close = %v", err)
		}
	})
}

// TestStoreWaitApplied: WaitApplied is the checkpoint's wait on the
// store's commits: it wakes at a commit, and returns ErrClosed once the
// store is closed.
func TestStoreWaitApplied(t *testing.T) {
	s := openMemStore(t)
	ctx := context.Background()
	must(t, s.WaitApplied(ctx, 0))
	done := make(chan error, 1)
	go func() { done <- s.WaitApplied(ctx, 3) }()
	mustCommit(t, s.NewBatch(), 2)
	mustCommit(t, s.NewBatch(), 3)
	must(t, <-done)
	go func() { done <- s.WaitApplied(ctx, 100) }()
	must(t, s.Close())
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitApplied on close = %v", err)
	}
}

func TestStoreCloseTwiceAndUseAfterClose(t *testing.T) {
	s := openMemStore(t)
	putAll(t, s, 1, mkProp("sp", "a", 1, api.StatePending, "x"))
	b := s.NewBatch()
	must(t, s.Close())
	must(t, s.Close())
	checks := map[string]error{}
	_, checks["Get"] = s.Get("sp", "a")
	_, checks["History"] = s.History("sp", "a")
	_, checks["Stats"] = s.Stats("sp")
	_, checks["List"] = s.List(ListQuery{Space: "sp"})
	_, checks["Spaces"] = s.Spaces()
	_, checks["DueExpiries"] = s.DueExpiries(t0, 1)
	checks["Dump"] = s.Dump(&bytes.Buffer{})
	_, checks["Digest"] = s.Digest()
	_, checks["Batch.Proposal"] = b.Proposal("sp", "a")
	checks["WaitApplied"] = s.WaitApplied(context.Background(), 5)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if s.AppliedSeq() != 1 {
		t.Errorf("AppliedSeq after close = %d", s.AppliedSeq())
	}
}

// TestStoreConcurrentReadsDuringCommits runs readers against one writer
// (meaningful under -race): every List page is internally consistent.
func TestStoreConcurrentReadsDuringCommits(t *testing.T) {
	s := openMemStore(t)
	const n = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pg, err := s.List(ListQuery{Space: "sp", State: api.StatePending, Limit: 20})
				if err != nil {
					errs <- err
					return
				}
				for _, p := range pg.Proposals {
					if p.State != api.StatePending {
						errs <- fmt.Errorf("pending page holds %s proposal %s", p.State, p.ID)
						return
					}
				}
				if _, err := s.Get("sp", "p001"); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 1; i <= n; i++ {
		b := s.NewBatch()
		must(t, b.PutProposal(mkProp("sp", fmt.Sprintf("p%03d", i), uint64(i), api.StatePending, "x")))
		if i > 1 {
			prev, err := b.Proposal("sp", fmt.Sprintf("p%03d", i-1))
			must(t, err)
			c := prev.Clone()
			c.State = api.StateRejected
			must(t, b.PutProposal(c))
		}
		mustCommit(t, b, uint64(i))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := listIDs(t, s, ListQuery{Space: "sp", State: api.StatePending}); !slices.Equal(got, []string{fmt.Sprintf("p%03d", n)}) {
		t.Fatalf("pending at the end = %v", got)
	}
}

// --- benchmarks ----------------------------------------------------------------

// benchStore builds a store of LEDGER_BENCH_PROPOSALS (default 100,000)
// proposals in one space, in commits of 2,000.
func benchStore(b *testing.B) (*Store, int) {
	n := 100_000
	if v := os.Getenv("LEDGER_BENCH_PROPOSALS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	s, err := OpenStore(StoreOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	r := rand.New(rand.NewSource(1))
	agents := make([]string, 200)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%03d", i)
	}
	start := time.Now()
	batch := s.NewBatch()
	for i := 1; i <= n; i++ {
		st := api.StateFulfilled
		switch x := r.Intn(10); {
		case x < 2:
			st = api.StatePending
		case x < 4:
			st = api.StateRejected
		case x < 5:
			st = api.StateWithdrawn
		}
		p := mkProp("default", fmt.Sprintf("env-req-%08d", i), uint64(i), st, agents[r.Intn(len(agents))], agents[r.Intn(len(agents))])
		p.Params = json.RawMessage(`{"name":"write_file","arguments":{"path":"/tmp/some/file.txt","content":"hello world, this is a proposal"}}`)
		if err := batch.PutProposal(p); err != nil {
			b.Fatal(err)
		}
		if batch.Len() >= 2000 || i == n {
			if err := batch.Commit(uint64(i)); err != nil {
				b.Fatal(err)
			}
			batch = s.NewBatch()
		}
	}
	built := time.Since(start)
	// Measure a settled store, as a long-running one is: no flush or
	// compaction of the load running under the timed reads.
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xFF}, true); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.Logf("built %d proposals in %v, settled in %v", n, built, time.Since(start)-built)
	return s, n
}

// opTimer measures each operation's wall time and the CPU time of its
// thread, and reports the p50/p99 of both (CPU figures show the work when the
// machine is busy and wall times are inflated by waiting for a CPU).
type opTimer struct {
	wall, cpu   []time.Duration
	t0          time.Time
	c0          int64
	cpuReliable bool
}

func newOpTimer(b *testing.B) *opTimer {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return &opTimer{wall: make([]time.Duration, 0, b.N), cpu: make([]time.Duration, 0, b.N), cpuReliable: threadCPU() >= 0}
}

func (o *opTimer) start() { o.c0, o.t0 = threadCPU(), time.Now() }

func (o *opTimer) stop() {
	o.wall = append(o.wall, time.Since(o.t0))
	o.cpu = append(o.cpu, time.Duration(threadCPU()-o.c0))
}

func (o *opTimer) report(b *testing.B) {
	pct := func(d []time.Duration, p int) float64 {
		slices.Sort(d)
		return float64(d[(len(d)-1)*p/100].Nanoseconds()) / 1e3
	}
	if len(o.wall) == 0 {
		return
	}
	b.ReportMetric(pct(o.wall, 50), "p50-µs")
	b.ReportMetric(pct(o.wall, 99), "p99-µs")
	if o.cpuReliable {
		b.ReportMetric(pct(o.cpu, 50), "cpu-p50-µs")
		b.ReportMetric(pct(o.cpu, 99), "cpu-p99-µs")
	}
}

// BenchmarkStoreGet reads random proposals. The store is built once per
// benchmark function (sub-benchmarks share it).
func BenchmarkStoreGet(b *testing.B) {
	s, n := benchStore(b)
	b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
		r := rand.New(rand.NewSource(2))
		ot := newOpTimer(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := fmt.Sprintf("env-req-%08d", r.Intn(n)+1)
			ot.start()
			if _, err := s.Get("default", id); err != nil {
				b.Fatal(err)
			}
			ot.stop()
		}
		b.StopTimer()
		ot.report(b)
	})
}

// BenchmarkStoreList reads pages of 100 pending proposals (a fifth of the
// store), half from the newest, half from a random position: decoded (List)
// and as stored JSON (ListRaw, what an HTTP handler writing the stored bytes
// pays).
func BenchmarkStoreList(b *testing.B) {
	s, n := benchStore(b)
	for _, raw := range []bool{false, true} {
		b.Run(fmt.Sprintf("n=%d/raw=%v", n, raw), func(b *testing.B) {
			r := rand.New(rand.NewSource(3))
			ot := newOpTimer(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q := ListQuery{Space: "default", State: api.StatePending, Limit: 100}
				if i%2 == 1 {
					q.Cursor = encodeCursor(uint64(r.Intn(n))+1, "")
				}
				ot.start()
				var got int
				if raw {
					pg, err := s.ListRaw(q)
					if err != nil {
						b.Fatal(err)
					}
					got = len(pg.Proposals)
				} else {
					pg, err := s.List(q)
					if err != nil {
						b.Fatal(err)
					}
					got = len(pg.Proposals)
				}
				ot.stop()
				if got == 0 && q.Cursor == "" {
					b.Fatal("empty first page")
				}
			}
			b.StopTimer()
			ot.report(b)
		})
	}
}

func TestStoreRawReadsMatchDecoded(t *testing.T) {
	s := openMemStore(t)
	all := genProposals(rand.New(rand.NewSource(5)), 40, 1, "sp")
	putAll(t, s, 40, all...)
	raw, err := s.GetRaw("sp", all[3].ID)
	must(t, err)
	p, err := s.Get("sp", all[3].ID)
	must(t, err)
	if enc, _ := ServedProposal(p); !bytes.Equal(enc, raw) {
		t.Fatalf("GetRaw = %s\nmarshal(Get) = %s", raw, enc)
	}
	if _, err := s.GetRaw("sp", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRaw of nothing: %v", err)
	}
	q := ListQuery{Space: "sp", State: api.StatePending, Limit: 3}
	for {
		pg, err := s.List(q)
		must(t, err)
		rp, err := s.ListRaw(q)
		must(t, err)
		if len(rp.Proposals) != len(pg.Proposals) || rp.NextCursor != pg.NextCursor {
			t.Fatalf("ListRaw page %d/%q vs List %d/%q", len(rp.Proposals), rp.NextCursor, len(pg.Proposals), pg.NextCursor)
		}
		for i, p := range pg.Proposals {
			if enc, _ := ServedProposal(p); !bytes.Equal(enc, rp.Proposals[i]) {
				t.Fatalf("ListRaw[%d] = %s\nList = %s", i, rp.Proposals[i], enc)
			}
		}
		if pg.NextCursor == "" {
			break
		}
		q.Cursor = pg.NextCursor
	}
}

func TestStoreOpenCreatesNestedDir(t *testing.T) {
	dir := t.TempDir() + "/a/b/projection"
	s := openDirStore(t, dir)
	putAll(t, s, 1, mkProp("sp", "a", 1, api.StatePending, "x"))
	must(t, s.Close())
	s = openDirStore(t, dir)
	defer s.Close()
	if s.AppliedSeq() != 1 {
		t.Fatalf("AppliedSeq = %d", s.AppliedSeq())
	}
}

// BenchmarkStoreCommit measures the write side: batches of 500 events, each
// a new proposal with its history entry and event ref, plus the stats, as
// the projector commits them (with pebble.Sync).
func BenchmarkStoreCommit(b *testing.B) {
	s, err := OpenStore(StoreOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	const perBatch = 500
	seq := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch := s.NewBatch()
		st, err := batch.Stats("default")
		if err != nil {
			b.Fatal(err)
		}
		if st == nil {
			st = api.NewStats()
		} else {
			st = st.Clone()
		}
		for j := 0; j < perBatch; j++ {
			seq++
			id := fmt.Sprintf("env-req-%08d", seq)
			if _, err := batch.EventRef("default", id); err != nil {
				b.Fatal(err)
			}
			if _, err := batch.Orphans("default", id); err != nil {
				b.Fatal(err)
			}
			p := mkProp("default", id, seq, api.StatePending, fmt.Sprintf("agent-%03d", seq%200), fmt.Sprintf("agent-%03d", seq%37))
			must(b, batch.PutProposal(p))
			must(b, batch.PutHistory("default", id, &api.HistoryEntry{Seq: seq, ID: id, Type: "proposal", Kind: ledger.KindProposal, From: p.Proposer, At: p.CreatedAt, Effect: api.EffectApplied}))
			must(b, batch.PutEventRef("default", id, &fold.EventRef{Seq: seq, Type: ledger.TypeProposal, Status: fold.EventApplied, Proposals: []string{id}}))
			st.Proposals++
			st.Events++
		}
		must(b, batch.PutStats("default", st))
		if err := batch.Commit(seq); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "events/s")
}

// TestStoreParkedAndFiled: the fold's small records read through the
// overlay (read-your-writes, deletes), survive Commit, and are named by
// DecodeKey.
func TestStoreParkedAndFiled(t *testing.T) {
	s := openMemStore(t)
	b := s.NewBatch()
	pk := &fold.ParkedEvent{Subject: "ledger.sp.x.reject.a", Raw: []byte(`{"id":"r"}`), Refs: 2}
	must(t, b.PutParked("sp", 7, pk))
	must(t, b.PutFiled("sp", "k", 3))
	if got, _ := b.Parked("sp", 7); got == nil || got.Refs != 2 {
		t.Fatalf("overlay Parked = %+v", got)
	}
	mustCommit(t, b, 1)

	b = s.NewBatch()
	defer b.Discard()
	got, err := b.Parked("sp", 7)
	if err != nil || got == nil || string(got.Raw) != `{"id":"r"}` || got.Refs != 2 {
		t.Fatalf("committed Parked = %+v, %v", got, err)
	}
	if n, err := b.Filed("sp", "k"); err != nil || n != 3 {
		t.Fatalf("Filed = %d, %v", n, err)
	}
	must(t, b.PutParked("sp", 7, nil))
	must(t, b.PutFiled("sp", "k", 0))
	if got, _ := b.Parked("sp", 7); got != nil {
		t.Fatalf("deleted Parked = %+v", got)
	}
	if n, _ := b.Filed("sp", "k"); n != 0 {
		t.Fatalf("deleted Filed = %d", n)
	}
	var names []string
	for _, k := range [][]byte{auxKey(tagParked, "sp", parkedID(7)), auxKey(tagFiled, "sp", "k")} {
		names = append(names, DecodeKey(k).String())
	}
	if names[0] != `parked orphan event seq 7 in space "sp"` || names[1] != `count of entries filed under "k" in space "sp"` {
		t.Fatalf("DecodeKey: %q", names)
	}
}

// TestStoreMetrics checks that Metrics reports the WAL bytes of a commit
// and refuses a closed store.
func TestStoreMetrics(t *testing.T) {
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	m0, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	if err := b.PutStats("default", &api.Stats{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	m1, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m1.WAL.BytesIn <= m0.WAL.BytesIn {
		t.Fatalf("WAL bytes in: %d after a commit, %d before", m1.WAL.BytesIn, m0.WAL.BytesIn)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Metrics(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Metrics after Close: %v, want ErrClosed", err)
	}
}

// TestValueSeparation checks that large proposal records go to Pebble blob
// files once flushed (OpenStore's value separation policy) and that every
// read path returns the same bytes from there as from the memtable: Get,
// GetRaw, List, the fold's prefetch and a batch's Proposal.
func TestValueSeparation(t *testing.T) {
	// No recent cache: every read goes to Pebble.
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), recentCap: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	pad := strings.Repeat("x", 2*valueSeparationMinSize)
	var ps []*api.Proposal
	for i := range 50 {
		p := mkProp("sp", fmt.Sprintf("p-%02d", i), uint64(i+1), api.StatePending, "alice", "bob")
		p.Params = json.RawMessage(`{"name":"write_file","content":"` + pad + `"}`)
		ps = append(ps, p)
	}
	putAll(t, s, 50, ps...)
	read := func() (raws [][]byte, page []byte) {
		t.Helper()
		for _, p := range ps {
			raw, err := s.GetRaw("sp", p.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Get("sp", p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("Get(%s) = %+v, want %+v", p.ID, got, p)
			}
			b := s.NewBatch()
			bp, err := b.Proposal("sp", p.ID)
			b.Discard()
			if err != nil || !reflect.DeepEqual(bp, p) {
				t.Fatalf("Batch.Proposal(%s) = %+v, %v", p.ID, bp, err)
			}
			raws = append(raws, raw)
		}
		lp, err := s.List(ListQuery{Space: "sp", State: api.StatePending, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		page, _ = json.Marshal(lp)
		return raws, page
	}
	memRaws, memPage := read()
	if m, _ := s.Metrics(); m.BlobFiles.LiveCount != 0 {
		t.Fatalf("blob files before any flush: %d", m.BlobFiles.LiveCount)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	m, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.BlobFiles.LiveCount == 0 || m.BlobFiles.ReferencedValueSize < uint64(len(ps)*len(pad)) {
		t.Fatalf("proposals not separated: %d blob files, %d value bytes referenced", m.BlobFiles.LiveCount, m.BlobFiles.ReferencedValueSize)
	}
	blobRaws, blobPage := read()
	for i := range memRaws {
		if !bytes.Equal(memRaws[i], blobRaws[i]) {
			t.Fatalf("GetRaw(%s) differs after flush:\n%s\n%s", ps[i].ID, memRaws[i], blobRaws[i])
		}
	}
	if !bytes.Equal(memPage, blobPage) {
		t.Fatal("List page differs after flush")
	}
	// The fold's prefetch reads them in key order through one iterator.
	b := s.NewBatch()
	defer b.Discard()
	var evs []fold.Event
	for i, p := range ps {
		raw := fmt.Sprintf(`{"protocol":"mew/v0.4","id":"f-%d","from":"bob","kind":"mcp/request","correlation_id":[%q],"payload":{"method":"tools/call","params":{"name":"write_file"}}}`, i, p.ID)
		subj := subjects.Event{Space: "sp", Key: p.ID, Type: string(ledger.TypeFulfil), Sender: "bob"}.String()
		evs = append(evs, fold.Event{Seq: uint64(51 + i), Time: t0, Subject: subj, Raw: []byte(raw)})
	}
	fold.DecodeAll(evs)
	if _, _, ok := evs[0].Decoded(); !ok {
		t.Fatal("test event does not decode")
	}
	if err := b.Prefetch(evs); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		sl := b.props[spaceID{"sp", p.ID}]
		if sl == nil || !reflect.DeepEqual(sl.cur, p) {
			t.Fatalf("prefetch of %s: %+v", p.ID, sl)
		}
	}
}
