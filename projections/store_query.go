package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
)

// ErrBadQuery is wrapped by List errors caused by the query itself (missing
// space, unknown state, malformed cursor).
var ErrBadQuery = errors.New("projections: bad query")

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ListQuery selects proposals of one space. Empty fields do not filter; all
// given filters must hold.
type ListQuery struct {
	// Space is required.
	Space string
	// State, Proposer, Target (a member of `to`, or a target named by the
	// seeds' targeting fields), Anomaly and Form (one of the seeds'
	// lifecycle forms among the proposal's events, Proposal.Forms) filter
	// on the proposal; ActionType, ResourceType and Domain on its kernel
	// part.
	State        api.ProposalState
	Proposer     string
	Target       string
	Anomaly      string
	Form         string
	ActionType   string
	ResourceType string
	Domain       string
	// Since (inclusive) and Until (exclusive) bound CreatedAt; zero is open.
	Since, Until time.Time
	// Limit is the page size: <= 0 means DefaultListLimit, and more than
	// MaxListLimit is MaxListLimit.
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	// MaxScan, when > 0, bounds how many index entries one call examines.
	// A call that reaches it returns the (possibly short, even empty) page
	// found so far with a NextCursor that resumes where it stopped, so a
	// caller must page until NextCursor is empty, not until a short page.
	// Zero means no bound.
	MaxScan int
}

// ListPage is one page of a List.
type ListPage struct {
	Proposals []*api.Proposal
	// NextCursor resumes after the last proposal of this page; empty when
	// there are no more.
	NextCursor string
}

// List returns the proposals of q.Space that pass every filter of q, newest
// first (by created_seq, then id), one page at a time.
//
// Each filter has an index, all ordered by (created_seq desc, id), and List
// intersects the indexes of the given filters by seeking (a zigzag join), so
// it loads exactly the records it returns; Since/Until are checked on the
// created_at stored in the index entries, again without loading records. With
// no filter it scans the space's "all" index. The cursor is a position in
// that shared order: proposals created (appended) while paging are newer
// than any cursor and are neither duplicated nor skipped by later pages.
//
// The whole call reads one consistent snapshot.
func (s *Store) List(q ListQuery) (ListPage, error) {
	var page ListPage
	next, err := s.list(q, func(n int) { page.Proposals = make([]*api.Proposal, n) }, func(i int, v []byte) error {
		p := new(api.Proposal)
		if err := json.Unmarshal(v, p); err != nil {
			return err
		}
		page.Proposals[i] = p
		return nil
	})
	if err != nil {
		return ListPage{}, err
	}
	page.NextCursor = next
	return page, nil
}

// RawPage is a ListPage whose proposals are their stored JSON, which is
// exactly what the HTTP API serves for each (ServedProposal).
type RawPage struct {
	Proposals  []json.RawMessage
	NextCursor string
}

// ListRaw is List without decoding the records: the HTTP list route copies
// them into its body, which skips a decode and an encode per proposal (most
// of a page's cost).
func (s *Store) ListRaw(q ListQuery) (RawPage, error) {
	var page RawPage
	next, err := s.list(q, func(n int) { page.Proposals = make([]json.RawMessage, n) }, func(i int, v []byte) error {
		page.Proposals[i] = bytes.Clone(v)
		return nil
	})
	if err != nil {
		return RawPage{}, err
	}
	page.NextCursor = next
	return page, nil
}

// list finds the page of q, calls size with its length, then each with the
// stored value of each proposal (valid only during the call) and its index
// in the page, and returns the next cursor.
func (s *Store) list(q ListQuery, size func(n int), each func(i int, v []byte) error) (string, error) {
	lp, err := listParamsOf(q)
	if err != nil {
		return "", err
	}
	if err := s.acquire(); err != nil {
		return "", err
	}
	defer s.release()
	snap := s.db.NewSnapshot()
	defer snap.Close()

	iters, err := openIndexIters(snap, listPrefixes(q))
	defer func() {
		for _, x := range iters {
			_ = x.it.Close()
		}
	}()
	if err != nil {
		return "", fmt.Errorf("projections: list space %q: %w", q.Space, err)
	}
	page, err := intersect(iters, lp, q)
	if err != nil {
		return "", err
	}
	size(len(page.hits))
	if err := loadHits(snap, q.Space, page.hits, each); err != nil {
		return "", err
	}
	return page.nextCursor(lp.limit, q.Space)
}

// listParams are a ListQuery's checked parameters: the page size, the
// position to start at (after the cursor) and the creation-time window.
type listParams struct {
	limit          int
	start          []byte
	sinceN, untilN int64
	checkTime      bool
}

// listParamsOf checks q (an error wrapping ErrBadQuery) and derives its
// parameters.
func listParamsOf(q ListQuery) (listParams, error) {
	if q.Space == "" {
		return listParams{}, fmt.Errorf("%w: list: space is required", ErrBadQuery)
	}
	if q.State != "" && !validState(q.State) {
		return listParams{}, fmt.Errorf("%w: list: unknown state %q", ErrBadQuery, q.State)
	}
	lp := listParams{limit: q.Limit, sinceN: math.MinInt64, untilN: math.MaxInt64}
	if lp.limit <= 0 {
		lp.limit = DefaultListLimit
	}
	if lp.limit > MaxListLimit {
		lp.limit = MaxListLimit
	}
	if q.Cursor != "" {
		seq, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return listParams{}, err
		}
		lp.start = indexSuffix(seq, id)
	}
	if !q.Since.IsZero() {
		lp.sinceN, lp.checkTime = clampNanos(q.Since), true
	}
	if !q.Until.IsZero() {
		lp.untilN, lp.checkTime = clampNanos(q.Until), true
	}
	return lp, nil
}

// openIndexIters opens one iterator a prefix on snap. On error the
// iterators opened so far are returned too, for the caller to close.
func openIndexIters(snap *pebble.Snapshot, prefixes [][]byte) ([]*indexIter, error) {
	iters := make([]*indexIter, 0, len(prefixes))
	for _, p := range prefixes {
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return iters, err
		}
		iters = append(iters, &indexIter{it: it, prefix: p})
	}
	return iters, nil
}

// listHit is a proposal of a page: its index position (sequence, id).
type listHit struct {
	seq uint64
	id  string
}

// listPage is what intersect found: the hits, whether a match exists after
// them (more), whether q.MaxScan stopped the walk first (stopped), and
// the lowest position not yet decided (target).
type listPage struct {
	hits          []listHit
	target        []byte
	more, stopped bool
}

// intersect walks the index iterators together (a leapfrog join: each
// seeks to the highest position seen until all agree) and collects up to
// lp.limit positions held by every index, in index order, that pass the
// time window.
func intersect(iters []*indexIter, lp listParams, q ListQuery) (listPage, error) {
	pg := listPage{target: lp.start} // target: the lowest position not yet decided
	var (
		matched  = 0 // iterators in a row positioned exactly at target
		scanned  = 0
		n        = len(iters)
		i        = 0
		needNext = false // iters[i] sits on the last match: step it with Next
	)
	for {
		if q.MaxScan > 0 && scanned >= q.MaxScan {
			pg.stopped = true
			break
		}
		x := iters[i]
		var ok bool
		if needNext {
			ok = x.next()
			needNext = false
		} else {
			ok = x.seek(pg.target)
		}
		scanned++
		if !ok {
			break // one index is exhausted: so is the intersection
		}
		suf := x.suffix()
		if matched == 0 || bytes.Compare(suf, pg.target) > 0 {
			pg.target = append(pg.target[:0:0], suf...)
			matched = 1
		} else {
			matched++
		}
		if matched < n {
			i = (i + 1) % n
			continue
		}
		// Every index holds target: a candidate.
		seq, id, err := readIndexSuffix(pg.target)
		if err != nil {
			return pg, fmt.Errorf("projections: list space %q: index key %q: %w", q.Space, x.it.Key(), err)
		}
		pass, err := lp.inWindow(x, q.Space, id)
		if err != nil {
			return pg, err
		}
		if pass {
			if len(pg.hits) == lp.limit {
				pg.more = true
				break
			}
			pg.hits = append(pg.hits, listHit{seq, id})
		}
		// Move past target: the successor of (seq, id) is (seq, id+"\x00").
		pg.target = indexSuffix(seq, id+"\x00")
		matched = 0
		needNext = true // x is at the old target; Next lands at or after the new one
	}
	for _, x := range iters {
		if err := x.it.Error(); err != nil {
			return pg, fmt.Errorf("projections: list space %q: %w", q.Space, err)
		}
	}
	return pg, nil
}

// inWindow reports whether the index entry x sits on (proposal id) was
// created within the query's time window (always, without one).
func (lp listParams) inWindow(x *indexIter, space, id string) (bool, error) {
	if !lp.checkTime {
		return true, nil
	}
	v := x.it.Value()
	if len(v) != 8 {
		return false, fmt.Errorf("projections: list space %q: index value of %q: %w", space, id, errBadKey)
	}
	c := readNanos(v)
	return c >= lp.sinceN && c < lp.untilN, nil
}

// loadHits loads the records of hits with one iterator, seeking in key
// order (forward seeks reuse the iterator's position), and calls each
// with every record's page position and value.
func loadHits(snap *pebble.Snapshot, space string, hits []listHit, each func(i int, v []byte) error) error {
	if len(hits) == 0 {
		return nil
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return hits[order[a]].id < hits[order[b]].id })
	pp := appendEsc([]byte{tagProposal}, space)
	rit, err := snap.NewIter(&pebble.IterOptions{LowerBound: pp, UpperBound: prefixEnd(pp)})
	if err != nil {
		return fmt.Errorf("projections: list space %q: %w", space, err)
	}
	defer rit.Close()
	var key []byte
	for _, i := range order {
		h := hits[i]
		key = appendEsc(append(key[:0], pp...), h.id)
		if !rit.SeekGE(key) || !bytes.Equal(rit.Key(), key) {
			if err := rit.Error(); err != nil {
				return fmt.Errorf("projections: list space %q: proposal %q: %w", space, h.id, err)
			}
			return fmt.Errorf("projections: list space %q: index names proposal %q (seq %d) that has no record", space, h.id, h.seq)
		}
		if err := each(i, rit.Value()); err != nil {
			return fmt.Errorf("projections: list space %q: decode proposal %q: %w", space, h.id, err)
		}
	}
	return nil
}

// nextCursor is the cursor of the page after pg ("" when there is none):
// after its last hit when more matches exist or a full page was scanned,
// else, when MaxScan stopped the walk, at the lowest undecided position.
func (pg listPage) nextCursor(limit int, space string) (string, error) {
	switch {
	case pg.more, pg.stopped && len(pg.hits) == limit:
		last := pg.hits[len(pg.hits)-1]
		return encodeCursor(last.seq, last.id+"\x00"), nil
	case pg.stopped:
		// target is the lowest undecided position (at least one step
		// was taken, so it is set): resume there, inclusive.
		seq, id, err := readIndexSuffix(pg.target)
		if err != nil {
			return "", fmt.Errorf("projections: list space %q: resume position: %w", space, err)
		}
		return encodeCursor(seq, id), nil
	}
	return "", nil
}

func validState(st api.ProposalState) bool {
	for _, x := range api.States {
		if st == x {
			return true
		}
	}
	return false
}

// listPrefixes returns the index prefixes that answer q's filters, or the
// "all" index when there are none.
func listPrefixes(q ListQuery) [][]byte {
	var out [][]byte
	add := func(kind byte, v string) {
		if v != "" {
			out = append(out, indexPrefix(q.Space, kind, v))
		}
	}
	// Rough order of selectivity: the first index drives the join.
	add(idxTarget, q.Target)
	add(idxProposer, q.Proposer)
	add(idxAnomaly, q.Anomaly)
	add(idxForm, q.Form)
	add(idxDomain, q.Domain)
	add(idxResourceType, q.ResourceType)
	add(idxActionType, q.ActionType)
	add(idxState, string(q.State))
	if len(out) == 0 {
		out = append(out, indexPrefix(q.Space, idxAll, ""))
	}
	return out
}

// indexIter walks one index in suffix order.
type indexIter struct {
	it      *pebble.Iterator
	prefix  []byte
	buf     []byte
	started bool
	valid   bool
}

func (x *indexIter) suffix() []byte { return x.it.Key()[len(x.prefix):] }

// seek positions x at the first entry >= target. Targets only grow, so an
// iterator already at or past target stays, and an exhausted one stays
// exhausted.
func (x *indexIter) seek(target []byte) bool {
	if x.started {
		if !x.valid {
			return false
		}
		if bytes.Compare(x.suffix(), target) >= 0 {
			return true
		}
	}
	x.started = true
	x.buf = append(append(x.buf[:0], x.prefix...), target...)
	x.valid = x.it.SeekGE(x.buf)
	return x.valid
}

func (x *indexIter) next() bool {
	x.valid = x.it.Next()
	return x.valid
}
