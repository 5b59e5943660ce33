package mcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

// tools are the server's tools, in the order tools/list shows them: one
// function each (a tool over a new route is one more function here).
var tools = []func(*Server){
	(*Server).toolGetProposal,
	(*Server).toolProposalHistory,
	(*Server).toolListProposals,
	(*Server).toolStats,
	(*Server).toolListAnomalies,
	(*Server).toolListGaps,
	(*Server).toolListEvents,
	(*Server).toolGetEvent,
	(*Server).toolProveProposal,
	(*Server).toolWaitForDecision,
}

// Where are the arguments every read takes.
type Where struct {
	Space  string `json:"space,omitempty" jsonschema:"the space (tenant) to read; empty: the ledger's default space"`
	MinSeq uint64 `json:"min_seq,omitempty" jsonschema:"wait (bounded by the ledger) until the projection has applied this stream sequence: pass the seq an append was acknowledged with to read your own write"`
}

func (w Where) read() client.ReadOptions {
	return client.ReadOptions{Space: w.Space, MinSeq: w.MinSeq}
}

// ByID names one proposal.
type ByID struct {
	ID string `json:"id" jsonschema:"the proposal's id (its mcp/proposal envelope id)"`
	Where
}

func (b ByID) check() error {
	if strings.TrimSpace(b.ID) == "" {
		return argError("id", "id is required: the proposal's envelope id")
	}
	return nil
}

// limit checks a limit argument: 0 is def, more than max is refused.
func limit(field string, n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > max:
		return 0, argError(field, "%s must be in 1..%d (default %d), not %d", field, max, def, n)
	}
	return n, nil
}

// --- get_proposal

func (s *Server) toolGetProposal() {
	addTool(s, "get_proposal", "Get a proposal",
		"One proposal's projected state: pending, fulfilled, withdrawn, rejected or expired; who decided it (decided_by, decided_event), the reason, every rejection (with its reason and explanation), every fulfilment (with its outcome), and the anomalies an auditor must see. Refused with not_found when the ledger has no proposal with this id in the space.",
		func(ctx context.Context, in ByID) (*api.Proposal, string, error) {
			if err := in.check(); err != nil {
				return nil, "", err
			}
			p, err := s.c.Get(ctx, in.ID, in.read())
			if err != nil {
				return nil, "", err
			}
			return p, describe(p), nil
		})
}

// describe is a proposal's one-paragraph text.
func describe(p *api.Proposal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Proposal %q in space %q by %s", p.ID, p.Space, p.Proposer)
	if p.Method != "" {
		fmt.Fprintf(&b, " (%s", p.Method)
		if len(p.To) > 0 {
			fmt.Fprintf(&b, " to %s", strings.Join(p.To, ", "))
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %s", p.State)
	if p.DecidedBy != "" {
		fmt.Fprintf(&b, " by %s", p.DecidedBy)
	}
	if p.DecidedEvent != "" {
		fmt.Fprintf(&b, " (event %s)", p.DecidedEvent)
	}
	if p.Reason != "" {
		fmt.Fprintf(&b, ", reason %q", p.Reason)
	}
	for _, r := range p.Rejections {
		if r.Explanation != "" && r.Event == p.DecidedEvent {
			fmt.Fprintf(&b, ", explained: %q", r.Explanation)
		}
	}
	if p.Withdrawal != nil && p.Withdrawal.Explanation != "" {
		fmt.Fprintf(&b, ", explained: %q", p.Withdrawal.Explanation)
	}
	fmt.Fprintf(&b, "; %d events, last at seq %d", p.Events, p.UpdatedSeq)
	if len(p.Anomalies) > 0 {
		fmt.Fprintf(&b, "; anomalies: %s", strings.Join(p.Anomalies, ", "))
	}
	b.WriteString(".")
	return b.String()
}

// --- proposal_history

// HistoryIn are proposal_history's arguments.
type HistoryIn struct {
	ByID
	AfterSeq uint64 `json:"after_seq,omitempty" jsonschema:"only events after this stream sequence: pass the previous answer's next_after_seq to read on"`
	Limit    int    `json:"limit,omitempty" jsonschema:"the most events to return (1..1000, default 200)"`
}

// HistoryOut is proposal_history's result.
type HistoryOut struct {
	ID     string             `json:"id"`
	Space  string             `json:"space"`
	Events []api.HistoryEntry `json:"events"`
	// Total is the number of events filed under the id after after_seq.
	Total     int  `json:"total"`
	Truncated bool `json:"truncated"`
	// NextAfterSeq, when truncated, is the after_seq of the next call.
	NextAfterSeq uint64 `json:"next_after_seq,omitempty"`
}

func (s *Server) toolProposalHistory() {
	addTool(s, "proposal_history", "A proposal's history",
		"Every event filed under a proposal's id, in stream order, each with its effect on the proposal (applied, recorded, duplicate, late, unauthorized, invalid, orphan, ignored), sender, kind, time and reason. Bounded by limit; truncated and next_after_seq say when there is more.",
		func(ctx context.Context, in HistoryIn) (*HistoryOut, string, error) {
			if err := in.check(); err != nil {
				return nil, "", err
			}
			n, err := limit("limit", in.Limit, DefaultHistoryLimit, MaxHistoryLimit)
			if err != nil {
				return nil, "", err
			}
			h, err := s.c.History(ctx, in.ID, in.read())
			if err != nil {
				return nil, "", err
			}
			evs := h.Events
			if in.AfterSeq > 0 {
				i, _ := slices.BinarySearchFunc(evs, in.AfterSeq+1, func(e api.HistoryEntry, seq uint64) int { return cmp.Compare(e.Seq, seq) })
				evs = evs[i:]
			}
			out := &HistoryOut{ID: h.ID, Space: h.Space, Total: len(evs), Events: evs}
			if len(evs) > n {
				out.Events, out.Truncated, out.NextAfterSeq = evs[:n], true, evs[n-1].Seq
			}
			if out.Events == nil {
				out.Events = []api.HistoryEntry{}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d events under %q in space %q", len(out.Events), h.ID, h.Space)
			if out.Truncated {
				fmt.Fprintf(&b, " (of %d; more after seq %d)", out.Total, out.NextAfterSeq)
			}
			b.WriteString(":")
			for _, e := range out.Events {
				fmt.Fprintf(&b, "\nseq %d %s %s from %s: %s", e.Seq, e.Type, e.ID, e.From, e.Effect)
				if e.Reason != "" {
					fmt.Fprintf(&b, " (%s)", e.Reason)
				}
			}
			return out, b.String(), nil
		})
}

// --- list_proposals

// ListIn are list_proposals' arguments: the API's filters and paging.
type ListIn struct {
	Where
	State        string `json:"state,omitempty" jsonschema:"only proposals in this state: pending, fulfilled, withdrawn, rejected or expired"`
	Proposer     string `json:"proposer,omitempty" jsonschema:"only proposals by this participant"`
	Target       string `json:"target,omitempty" jsonschema:"only proposals addressed to this participant"`
	Anomaly      string `json:"anomaly,omitempty" jsonschema:"only proposals carrying this anomaly (e.g. fulfilled_after_withdrawn)"`
	Since        string `json:"since,omitempty" jsonschema:"created at or after: RFC 3339 time or YYYY-MM-DD"`
	Until        string `json:"until,omitempty" jsonschema:"created before: RFC 3339 time or YYYY-MM-DD"`
	Form         string `json:"form,omitempty" jsonschema:"only proposals with an event of this lifecycle form (e.g. bid)"`
	ActionType   string `json:"action_type,omitempty" jsonschema:"kernel proposals: by action type"`
	ResourceType string `json:"resource_type,omitempty" jsonschema:"kernel proposals: by target resource type"`
	Domain       string `json:"domain,omitempty" jsonschema:"kernel proposals: by domain"`
	Limit        int    `json:"limit,omitempty" jsonschema:"page size (1..200, default 20)"`
	Cursor       string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page"`
}

func (in ListIn) filter(n int) client.ListFilter {
	return client.ListFilter{State: in.State, Proposer: in.Proposer, Target: in.Target, Anomaly: in.Anomaly,
		Since: in.Since, Until: in.Until, Form: in.Form, ActionType: in.ActionType, ResourceType: in.ResourceType,
		Domain: in.Domain, Limit: n}
}

// ListOut is a page of proposals, newest first.
type ListOut struct {
	Proposals []*api.Proposal `json:"proposals"`
	Count     int             `json:"count"`
	// NextCursor is the cursor of the next page; "" on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
	// Truncated says there is more than this page.
	Truncated bool `json:"truncated"`
}

func (s *Server) toolListProposals() {
	addTool(s, "list_proposals", "List proposals",
		"Proposals newest first, filtered by state, proposer, target, anomaly, creation time, lifecycle form or kernel fields (the API's filters). One page at a time: pass next_cursor as cursor for the next.",
		func(ctx context.Context, in ListIn) (*ListOut, string, error) {
			n, err := limit("limit", in.Limit, DefaultListLimit, MaxListLimit)
			if err != nil {
				return nil, "", err
			}
			page, err := s.c.ListPage(ctx, in.filter(n), in.Cursor, in.read())
			if err != nil {
				return nil, "", err
			}
			out := listOut(page.Proposals, page.NextCursor)
			return out, listText(out.Proposals, out.NextCursor != ""), nil
		})
}

func listOut(ps []*api.Proposal, next string) *ListOut {
	if ps == nil {
		ps = []*api.Proposal{}
	}
	return &ListOut{Proposals: ps, Count: len(ps), NextCursor: next, Truncated: next != ""}
}

func listText(ps []*api.Proposal, more bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d proposals", len(ps))
	if more {
		b.WriteString(" (more: pass next_cursor as cursor)")
	}
	for _, p := range ps {
		fmt.Fprintf(&b, "\n%s [%s] %s by %s", p.ID, p.Space, p.State, p.Proposer)
		if p.DecidedBy != "" {
			fmt.Fprintf(&b, ", decided by %s", p.DecidedBy)
		}
		if len(p.Anomalies) > 0 {
			fmt.Fprintf(&b, ", anomalies: %s", strings.Join(p.Anomalies, ", "))
		}
	}
	return b.String()
}

// --- stats

// StatsIn are stats' arguments.
type StatsIn struct {
	Where
}

func (s *Server) toolStats() {
	addTool(s, "stats", "Ledger statistics",
		"Counts of a space: proposals by state, rejection and withdrawal reasons, anomalies, events by type and by effect, orphans waiting, recording gaps.",
		func(ctx context.Context, in StatsIn) (*api.Stats, string, error) {
			st, err := s.c.Stats(ctx, in.read())
			if err != nil {
				return nil, "", err
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d proposals, %d events.", st.Proposals, st.Events)
			writeCounts(&b, "By state", st.ByState)
			writeCounts(&b, "Anomalies", st.Anomalies)
			writeCounts(&b, "Rejection reasons", st.RejectionReasons)
			return st, b.String(), nil
		})
}

func writeCounts(b *strings.Builder, title string, m map[string]int64) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(b, " %s:", title)
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, " %s %d", k, m[k])
	}
	b.WriteString(".")
}

// --- list_anomalies

// AnomaliesIn are list_anomalies' arguments.
type AnomaliesIn struct {
	Where
	Anomaly string `json:"anomaly,omitempty" jsonschema:"one anomaly (e.g. fulfilled_after_withdrawn, fulfillment_mismatch, unauthorized_withdraw); empty: every anomaly, newest first, without paging"`
	Since   string `json:"since,omitempty" jsonschema:"created at or after: RFC 3339 time or YYYY-MM-DD"`
	Until   string `json:"until,omitempty" jsonschema:"created before: RFC 3339 time or YYYY-MM-DD"`
	Limit   int    `json:"limit,omitempty" jsonschema:"the most proposals to return (1..200, default 20)"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"with anomaly: the next_cursor of the previous page"`
}

// AnomaliesOut are the proposals carrying anomalies, newest first.
type AnomaliesOut struct {
	// Counts are the space's anomaly counts (stats; not filtered by time).
	Counts    map[string]int64 `json:"counts"`
	Proposals []*api.Proposal  `json:"proposals"`
	Count     int              `json:"count"`
	// NextCursor (with anomaly) is the cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
	// Truncated says there are more proposals than returned: page with
	// next_cursor (with anomaly), or name one anomaly to page through it.
	Truncated bool `json:"truncated"`
}

func (s *Server) toolListAnomalies() {
	addTool(s, "list_anomalies", "Proposals with anomalies",
		"What an auditor must look at: proposals carrying anomalies (fulfilled_after_withdrawn / _rejected / _expired: the operation ran after it was called off; fulfillment_mismatch and target_mismatch: what ran is not what was proposed; unauthorized_withdraw, self_fulfilled, multiple_fulfillments, id_conflict, id_reused, ...), newest first, with the space's counts per anomaly. With anomaly: one anomaly, paged with cursor; without: every anomaly, up to limit.",
		func(ctx context.Context, in AnomaliesIn) (*AnomaliesOut, string, error) {
			n, err := limit("limit", in.Limit, DefaultListLimit, MaxListLimit)
			if err != nil {
				return nil, "", err
			}
			if in.Cursor != "" && in.Anomaly == "" {
				return nil, "", argError("cursor", "cursor pages one anomaly: name it with anomaly")
			}
			st, err := s.c.Stats(ctx, in.read())
			if err != nil {
				return nil, "", err
			}
			out := &AnomaliesOut{Counts: st.Anomalies}
			if out.Counts == nil {
				out.Counts = map[string]int64{}
			}
			names := []string{in.Anomaly}
			if in.Anomaly == "" {
				names = nil
				for _, a := range slices.Sorted(maps.Keys(st.Anomalies)) {
					if st.Anomalies[a] > 0 {
						names = append(names, a)
					}
				}
			}
			seen := map[string]bool{}
			for _, a := range names {
				f := client.ListFilter{Anomaly: a, Since: in.Since, Until: in.Until, Limit: n}
				page, err := s.c.ListPage(ctx, f, in.Cursor, in.read())
				if err != nil {
					return nil, "", err
				}
				if page.NextCursor != "" {
					out.Truncated = true
					if in.Anomaly != "" {
						out.NextCursor = page.NextCursor
					}
				}
				for _, p := range page.Proposals {
					if k := p.Space + "\x00" + p.ID; !seen[k] {
						seen[k] = true
						out.Proposals = append(out.Proposals, p)
					}
				}
			}
			// Newest first across anomalies, then the first n.
			slices.SortStableFunc(out.Proposals, func(a, b *api.Proposal) int { return cmp.Compare(b.CreatedSeq, a.CreatedSeq) })
			if len(out.Proposals) > n {
				out.Proposals, out.Truncated = out.Proposals[:n], true
			}
			if out.Proposals == nil {
				out.Proposals = []*api.Proposal{}
			}
			out.Count = len(out.Proposals)
			var b strings.Builder
			if len(out.Counts) == 0 {
				b.WriteString("No anomalies in this space.")
			} else {
				writeCounts(&b, "Anomaly counts", out.Counts)
			}
			b.WriteString("\n")
			b.WriteString(listText(out.Proposals, out.Truncated))
			return out, b.String(), nil
		})
}

// --- list_gaps

// GapsIn are list_gaps' arguments.
type GapsIn struct {
	Where
	Limit  int    `json:"limit,omitempty" jsonschema:"page size (1..200, default 20)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page"`
}

// GapsOut is a page of recording gaps, oldest first, each marked covered
// when other recorders recorded its whole window, and the space's holes
// (contract §14 "Several recorders": windows no recorder recorded).
type GapsOut struct {
	Gaps       []api.Gap  `json:"gaps"`
	Count      int        `json:"count"`
	NextCursor string     `json:"next_cursor,omitempty"`
	Truncated  bool       `json:"truncated"`
	Holes      []api.Hole `json:"holes"`
}

func (s *Server) toolListGaps() {
	addTool(s, "list_gaps", "Recording gaps",
		"The recording gaps of the recorders (live bridges, --history followers) of a MEW space, oldest first: when one was disconnected and what it may have missed. A gap another recorder recorded end to end is covered (covered_by names them); the holes are the windows no recorder recorded, between the envelopes named on either side: the ledger's memory of that space lacks what the space carried there. One page of gaps at a time, every hole.",
		func(ctx context.Context, in GapsIn) (*GapsOut, string, error) {
			n, err := limit("limit", in.Limit, DefaultListLimit, MaxListLimit)
			if err != nil {
				return nil, "", err
			}
			q := url.Values{"limit": {strconv.Itoa(n)}}
			for k, v := range map[string]string{"space": in.Space, "cursor": in.Cursor} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if in.MinSeq > 0 {
				q.Set("min_seq", strconv.FormatUint(in.MinSeq, 10))
			}
			if q.Get("space") == "" && s.opts.Space != "" {
				q.Set("space", s.opts.Space)
			}
			var page api.Gaps
			if err := s.c.Do(ctx, http.MethodGet, "/v1/gaps", q, nil, "", false, &page); err != nil {
				return nil, "", err
			}
			out := &GapsOut{Gaps: page.Gaps, Count: len(page.Gaps), NextCursor: page.NextCursor, Truncated: page.NextCursor != ""}
			if out.Gaps == nil {
				out.Gaps = []api.Gap{}
			}
			hq := url.Values{"space": {q.Get("space")}}
			if q.Get("space") == "" {
				hq.Del("space")
			}
			var holes api.Holes
			if err := s.c.Do(ctx, http.MethodGet, "/v1/holes", hq, nil, "", false, &holes); err != nil {
				return nil, "", err
			}
			out.Holes = holes.Holes
			if out.Holes == nil {
				out.Holes = []api.Hole{}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d recording gaps", out.Count)
			if out.Truncated {
				b.WriteString(" (more: pass next_cursor as cursor)")
			}
			fmt.Fprintf(&b, "; %d holes (windows no recorder recorded)", len(out.Holes))
			for _, h := range out.Holes {
				fmt.Fprintf(&b, "\nhole in MEW space %s after %s, before %s; recorders in gap: %s", h.MEWSpace, holeEdge(h.After, "the log's start"),
					holeEdge(h.Before, "now (still open)"), strings.Join(h.Recorders, ", "))
			}
			for _, g := range out.Gaps {
				fmt.Fprintf(&b, "\nbridge %s (MEW space %s): disconnected %s", g.Bridge, g.MEWSpace, g.DisconnectedAt.Format(time.RFC3339))
				if g.ReconnectedAt != nil {
					fmt.Fprintf(&b, ", back %s", g.ReconnectedAt.Format(time.RFC3339))
				} else {
					b.WriteString(", not back")
				}
				if g.Reason != "" {
					fmt.Fprintf(&b, " (%s)", g.Reason)
				}
				if g.Covered {
					fmt.Fprintf(&b, "; covered by %s", strings.Join(g.CoveredBy, ", "))
				}
			}
			return out, b.String(), nil
		})
}

// --- wait_for_decision

// WaitIn are wait_for_decision's arguments.
type WaitIn struct {
	ByID
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the decision, in seconds (default 25, which fits MEW bridge's 30 s request timeout; at most the server's maximum, 600 unless configured)"`
}

// WaitOut is a proposal's state at the end of a wait.
type WaitOut struct {
	ID    string `json:"id"`
	Space string `json:"space"`
	State string `json:"state"`
	// Decided: the proposal left pending (fulfilled, withdrawn, rejected
	// or expired). TimedOut: the timeout passed while it was pending.
	Decided      bool   `json:"decided"`
	TimedOut     bool   `json:"timed_out"`
	DecidedBy    string `json:"decided_by,omitempty"`
	DecidedEvent string `json:"decided_event,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Explanation is the decider's chat explaining a rejection or a
	// withdrawal, when one was recorded.
	Explanation string        `json:"explanation,omitempty"`
	Proposal    *api.Proposal `json:"proposal"`
}

// progressEvery is the interval of wait_for_decision's progress
// notifications.
const progressEvery = 15 * time.Second

// errDecided ends a watch when the proposal leaves pending.
var errDecided = errors.New("decided")

func (s *Server) toolWaitForDecision() {
	addTool(s, "wait_for_decision", "Wait for a proposal's decision",
		"Waits until a proposal leaves pending (fulfilled, withdrawn, rejected or expired) or the timeout passes, following the ledger's watch stream (no polling), and answers the proposal's state then: with its decider, deciding event, reason and explanation when decided; timed_out and state pending when the timeout passed first. A proposal already decided is answered at once.",
		func(ctx context.Context, in WaitIn) (*WaitOut, string, error) {
			if err := in.check(); err != nil {
				return nil, "", err
			}
			timeout := DefaultWait
			if in.TimeoutSeconds < 0 || in.TimeoutSeconds > s.opts.MaxWait.Seconds() {
				return nil, "", argError("timeout_seconds", "timeout_seconds must be in 0..%g (0: the default %g), not %g", s.opts.MaxWait.Seconds(), DefaultWait.Seconds(), in.TimeoutSeconds)
			}
			if in.TimeoutSeconds > 0 {
				timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
			}
			if timeout > s.opts.MaxWait {
				timeout = s.opts.MaxWait
			}
			p, err := s.c.Get(ctx, in.ID, in.read())
			if err != nil {
				return nil, "", err
			}
			if p.State == api.StatePending {
				p, err = s.waitDecided(ctx, p, timeout)
				if err != nil {
					return nil, "", err
				}
			}
			out := waitOut(p)
			if out.Decided {
				return out, "Decided. " + describe(p), nil
			}
			return out, fmt.Sprintf("Still pending after %v: %s", timeout, describe(p)), nil
		})
}

// waitDecided follows the watch stream of p (pending, as read) from its
// last change until it leaves pending or timeout passes, and returns the
// proposal then.
func (s *Server) waitDecided(ctx context.Context, p *api.Proposal, timeout time.Duration) (*api.Proposal, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A progress notification now (the proposal was read pending: any
	// decision from here on is on the stream from p.UpdatedSeq) and every
	// progressEvery while waiting.
	progress(wctx, fmt.Sprintf("waiting for a decision on %q (pending at seq %d)", p.ID, p.UpdatedSeq))
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				progress(wctx, fmt.Sprintf("still waiting for a decision on %q", p.ID))
			}
		}
	}()
	defer func() { cancel(); <-ticking }()
	var decided uint64
	err := s.c.WatchFunc(wctx, client.WatchOptions{Space: p.Space, Proposal: p.ID, SinceSeq: p.UpdatedSeq, Retry: s.opts.WatchRetry},
		func(ch api.Change, _ []byte) error {
			if ch.State != api.StatePending {
				decided = ch.Seq
				return errDecided
			}
			return nil
		})
	if err != nil && !errors.Is(err, errDecided) {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up (cancelled the call)
	}
	if decided == 0 {
		return p, nil // timed out: the proposal as read (still pending)
	}
	return s.c.Get(ctx, p.ID, client.ReadOptions{Space: p.Space, MinSeq: decided})
}

func waitOut(p *api.Proposal) *WaitOut {
	out := &WaitOut{ID: p.ID, Space: p.Space, State: string(p.State), Proposal: p,
		Decided: p.State != api.StatePending, DecidedBy: p.DecidedBy, DecidedEvent: p.DecidedEvent, Reason: p.Reason}
	out.TimedOut = !out.Decided
	for _, r := range p.Rejections {
		if r.Event == p.DecidedEvent && r.Explanation != "" {
			out.Explanation = r.Explanation
		}
	}
	if p.Withdrawal != nil && p.State == api.StateWithdrawn && p.Withdrawal.Explanation != "" {
		out.Explanation = p.Withdrawal.Explanation
	}
	return out
}

// holeEdge names the envelope on one side of a hole.
func holeEdge(e *api.HoleEdge, none string) string {
	if e == nil {
		return none
	}
	if e.ID == "" {
		return fmt.Sprintf("seq %d", e.Seq)
	}
	return fmt.Sprintf("%s (seq %d)", e.ID, e.Seq)
}
