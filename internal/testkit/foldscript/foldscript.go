// Package foldscript runs the fold's data-driven scripts
// (projections/fold/testdata/fold, cockroachdb/datadriven files: `go test
// ./projections/fold -run TestFoldScripts -rewrite` rewrites their
// expected outputs, raft's convention). A script builds a log line by line
// (see Script.ParseLine), folds it into a fold.MemState and prints what the
// fold made of it; the fold's own tests run the scripts on the MemState,
// package projections's run them again with a Check that folds the same
// log into Pebble stores and compares. Test code only.
//
// Commands: fold (lines of envelopes, with directives; prints each
// event's outcomes), proposal, history, stats, orphans, gaps, holes,
// recorders (print the state; args space=, id=), replay (folds the whole log again into a fresh
// state, which must be identical, then runs the Check).
package foldscript

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// Base is the stream time of the first event of a fold script.
var Base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Script is the state of one data-driven fold script: the log being built
// and the MemState it is folded into.
type Script struct {
	State  *fold.MemState
	Folder *fold.Folder
	Log    []fold.Event
	seq    uint64
	now    time.Time
	last   string
}

// New returns an empty script: no log, an empty MemState, folded by
// Folder() (which verifies the script's mark seals).
func New() *Script {
	return &Script{State: fold.NewMemState(), Folder: Folder(), now: Base.Add(-time.Second)}
}

// MarkKeys are the mark seal keys of the scripts (a fixed test key): the
// lines with a mark= directive are sealed with them, as the ledger's
// append path seals, unless the line says unsealed or badseal.
var MarkKeys = func() *ledger.MarkKeys {
	k, err := ledger.NewMarkKeys([]byte("foldscript mark seal key 32 byte"))
	if err != nil {
		panic(err)
	}
	return k
}()

// Folder returns a Folder that verifies mark seals with MarkKeys.
func Folder() *fold.Folder {
	f := fold.NewFolder()
	f.MarkKeys = MarkKeys
	return f
}

// Seal sets ev.BridgeSeal to the seal the ledger's append path gives
// ev.Bridge (MarkKeys).
func Seal(ev *fold.Event) {
	ev.BridgeSeal = MarkKeys.Seal(ev.Subject, ev.Bridge, ev.Raw)
}

// Check is run at each replay command and at the end of a script with
// the script's state and log (nil: nothing more is checked).
type Check func(t *testing.T, mem *fold.MemState, log []fold.Event)

// Walk runs every script under dir (Run on each).
func Walk(t *testing.T, dir string, check Check) {
	WalkWith(t, dir, check, nil)
}

// Command answers a command the runner does not know (the Pebble store's
// "events", package projections); ok is false when it does not know it
// either.
type Command func(t *testing.T, td *datadriven.TestData, s *Script) (out string, ok bool)

// WalkWith is Walk with extra commands (nil: none).
func WalkWith(t *testing.T, dir string, check Check, extra Command) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		RunWith(t, path, check, extra)
	})
}

// Run runs the script at path, with check (nil: none).
func Run(t *testing.T, path string, check Check) { RunWith(t, path, check, nil) }

// RunWith is Run with extra commands (nil: none).
func RunWith(t *testing.T, path string, check Check, extra Command) {
	s := New()
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		space := "default"
		if td.HasArg("space") {
			td.ScanArgs(t, "space", &space)
		}
		id := s.last
		if td.HasArg("id") {
			td.ScanArgs(t, "id", &id)
		}
		switch td.Cmd {
		case "fold":
			var b strings.Builder
			for _, line := range strings.Split(td.Input, "\n") {
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					continue
				}
				ev := s.ParseLine(t, space, line)
				s.Log = append(s.Log, ev)
				out, err := s.Folder.Apply(s.State, ev)
				if err != nil {
					t.Fatalf("seq %d: %v", ev.Seq, err)
				}
				fmt.Fprintf(&b, "seq %d:", ev.Seq)
				for _, o := range out {
					fmt.Fprintf(&b, " %s=%s", o.Key, o.Effect)
					if o.Seq != ev.Seq {
						fmt.Fprintf(&b, "(%d)", o.Seq)
					}
				}
				b.WriteString("\n")
			}
			return b.String()
		case "proposal":
			p, _ := s.State.Proposal(space, id)
			if p == nil {
				return "not found\n"
			}
			s.last = id
			return formatProposal(p)
		case "history":
			var b strings.Builder
			for _, h := range s.State.History(space, id) {
				b.WriteString(formatEntry(h))
			}
			if b.Len() == 0 {
				return "no history\n"
			}
			return b.String()
		case "stats":
			st, _ := s.State.Stats(space)
			if st == nil {
				return "no stats\n"
			}
			return formatStats(st)
		case "orphans":
			return fmt.Sprintf("waiting: %d\n", s.State.WaitingOrphans(space))
		case "replay":
			// Fold the whole log again into a fresh state and compare
			// everything: the fold is a pure function of the log.
			fresh := fold.NewMemState()
			for _, ev := range s.Log {
				if _, err := s.Folder.Apply(fresh, ev); err != nil {
					t.Fatal(err)
				}
			}
			if a, b := s.State.Dump(), fresh.Dump(); a != b {
				t.Fatalf("replay differs:\nlive:\n%s\nreplay:\n%s", a, b)
			}
			// So does check (the Pebble store), folded up to here.
			if check != nil {
				check(t, s.State, s.Log)
			}
			return "identical\n"
		case "holes":
			return FormatHoles(s.Holes(space))
		case "recorders":
			return s.formatRecorders(space)
		case "gaps":
			var b strings.Builder
			gaps := s.State.Gaps(space)
			recs, runs := s.State.BridgeSessions(space)
			fold.Cover(gaps, recorders(recs, runs))
			for _, g := range gaps {
				fmt.Fprintf(&b, "%d %s bridge=%s mew_space=%s gateway=%s last=%s disconnected=%s", g.Seq, g.ID, g.Bridge, g.MEWSpace, g.Gateway, g.LastEnvelope, g.DisconnectedAt.Format(time.RFC3339Nano))
				if g.ReconnectedAt != nil {
					fmt.Fprintf(&b, " reconnected=%s", g.ReconnectedAt.Format(time.RFC3339Nano))
				}
				if g.Reason != "" {
					fmt.Fprintf(&b, " reason=%q", g.Reason)
				}
				if g.LastSeq != 0 || g.EndSeq != 0 || g.Session != "" {
					fmt.Fprintf(&b, " window=%d..%s", g.LastSeq, seqOrOpen(g.EndSeq))
				}
				if g.Covered {
					fmt.Fprintf(&b, " covered_by=%s", strings.Join(g.CoveredBy, ","))
				}
				b.WriteString("\n")
			}
			if b.Len() == 0 {
				return "no gaps\n"
			}
			return b.String()
		default:
			if extra != nil {
				if out, ok := extra(t, td, s); ok {
					return out
				}
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		}
	})
	// Every script, at its end: check (the Pebble store, committed in
	// batches of one and of many, holds exactly what the MemState holds).
	if check != nil && len(s.Log) > 0 {
		check(t, s.State, s.Log)
	}
}

// ParseLine reads one input line of a fold command. A line may start with
// directives, each followed by a space:
//
//	@+90s           stream time = script start + 90s (default: previous + 1s)
//	subject=SUBJ    store under this subject instead of the one the append
//	                path would build
//	clash           the message carries the header Ledger-Msg-Id-Clash
//	mark=B/M/S[/p=N][/d=N][/h]
//	                the message carries the bridge mark (HeaderBridge) of
//	                bridge B, MEW space M, session S (Prev N, Dups N,
//	                History), sealed as the ledger's append path seals
//	                it (MarkKeys)
//	unsealed        the mark carries no seal (as a client publishing
//	                straight onto the stream would store it)
//	badseal         the mark carries a seal made for other bytes
//
// The rest of the line is the raw message body, stored as is.
func (s *Script) ParseLine(t testing.TB, space, line string) fold.Event {
	t.Helper()
	at := s.now.Add(time.Second)
	subject, mark := "", ""
	clash, unsealed, badseal := false, false, false
	for {
		switch {
		case strings.HasPrefix(line, "unsealed "):
			unsealed, line = true, strings.TrimPrefix(line, "unsealed ")
			continue
		case strings.HasPrefix(line, "badseal "):
			badseal, line = true, strings.TrimPrefix(line, "badseal ")
			continue
		case strings.HasPrefix(line, "clash "):
			clash, line = true, strings.TrimPrefix(line, "clash ")
			continue
		case strings.HasPrefix(line, "@"):
			tok, rest, _ := strings.Cut(line, " ")
			d, err := time.ParseDuration(strings.TrimPrefix(tok[1:], "+"))
			if err != nil {
				t.Fatalf("bad time directive %q: %v", tok, err)
			}
			at, line = Base.Add(d), rest
			continue
		case strings.HasPrefix(line, "mark="):
			tok, rest, _ := strings.Cut(line, " ")
			mark, line = parseMark(t, strings.TrimPrefix(tok, "mark=")), rest
			continue
		case strings.HasPrefix(line, "subject="):
			tok, rest, _ := strings.Cut(line, " ")
			subject, line = strings.TrimPrefix(tok, "subject="), rest
			continue
		}
		break
	}
	raw := []byte(line)
	if subject == "" {
		subject = DefaultSubject(space, raw, at)
	}
	s.seq++
	s.now = at
	ev := fold.Event{Seq: s.seq, Time: at, Subject: subject, Raw: raw, MsgIDClash: clash, Bridge: mark}
	switch {
	case mark == "" || unsealed:
	case badseal:
		ev.BridgeSeal = MarkKeys.Seal(subject, mark, append(raw[:len(raw):len(raw)], ' '))
	default:
		Seal(&ev)
	}
	return ev
}

// DefaultSubject is the subject the append path would use; for input it
// would refuse, a subject under key "unknown".
func DefaultSubject(space string, raw []byte, at time.Time) string {
	d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: at})
	if err != nil {
		return subjects.Event{Space: space, Key: "unknown", Type: "proposal", Sender: "unknown"}.String()
	}
	typ := string(d.Type)
	return subjects.Event{Space: space, Key: d.Key, Type: typ, Sender: d.Env.From}.String()
}

func formatProposal(p *api.Proposal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s proposer=%s events=%d created=%d updated=%d\n", p.State, p.Proposer, p.Events, p.CreatedSeq, p.UpdatedSeq)
	if p.DecidedBy != "" || p.DecidedEvent != "" {
		fmt.Fprintf(&b, "decided: by=%s event=%s seq=%d reason=%q\n", p.DecidedBy, p.DecidedEvent, p.DecidedSeq, p.Reason)
	}
	if len(p.Anomalies) > 0 {
		fmt.Fprintf(&b, "anomalies: %s\n", strings.Join(p.Anomalies, ","))
	}
	for _, r := range p.Rejections {
		fmt.Fprintf(&b, "rejection: %s from=%s reason=%q late=%t", r.Event, r.From, r.Reason, r.Late)
		if r.Explanation != "" {
			fmt.Fprintf(&b, " explanation=%q", r.Explanation)
		}
		b.WriteString("\n")
	}
	for _, f := range p.Fulfillments {
		fmt.Fprintf(&b, "fulfillment: %s from=%s late=%t", f.Event, f.From, f.Late)
		if f.Outcome != "" {
			fmt.Fprintf(&b, " outcome=%s by=%s", f.Outcome, f.Response)
		}
		if len(f.Anomalies) > 0 {
			fmt.Fprintf(&b, " anomalies=%s", strings.Join(f.Anomalies, ","))
		}
		if len(f.To) > 0 {
			fmt.Fprintf(&b, " to=%s", strings.Join(f.To, ","))
		}
		if len(f.Responses) > 1 {
			var rs []string
			for _, r := range f.Responses {
				rs = append(rs, r.Event+":"+r.From+":"+r.Outcome)
			}
			fmt.Fprintf(&b, " responses=%s", strings.Join(rs, ","))
		}
		b.WriteString("\n")
	}
	if w := p.Withdrawal; w != nil {
		fmt.Fprintf(&b, "withdrawal: %s from=%s reason=%q", w.Event, w.From, w.Reason)
		if w.Explanation != "" {
			fmt.Fprintf(&b, " explanation=%q", w.Explanation)
		}
		b.WriteString("\n")
	}
	if p.ExpiresAt != nil {
		fmt.Fprintf(&b, "expires_at: %s\n", p.ExpiresAt.Format(time.RFC3339Nano))
	}
	if len(p.Targets) > 0 {
		var ts []string
		for _, t := range p.Targets {
			ts = append(ts, t.ID+"("+strings.Join(t.Sources, "+")+")")
		}
		fmt.Fprintf(&b, "targets: %s\n", strings.Join(ts, " "))
	}
	if x := p.Exclusive; x != nil {
		fmt.Fprintf(&b, "exclusive: fallback_to_broadcast=%t quick_reject=%t", x.FallbackToBroadcast, x.QuickReject)
		if x.Until != nil {
			fmt.Fprintf(&b, " until=%s", x.Until.Format(time.RFC3339Nano))
		}
		b.WriteString("\n")
	}
	for _, st := range p.Statuses {
		fmt.Fprintf(&b, "status: %s=%s by=%s\n", st.From, st.Status, st.Event)
	}
	for _, l := range []struct {
		name string
		ns   []api.FormNote
	}{{"acceptance", p.Acceptances}, {"deferral", p.Deferrals}, {"bid", p.Bids}} {
		for _, n := range l.ns {
			fmt.Fprintf(&b, "%s: %s from=%s form=%s", l.name, n.Event, n.From, n.Form)
			if n.Reason != "" {
				fmt.Fprintf(&b, " reason=%q", n.Reason)
			}
			if n.Confidence != nil {
				fmt.Fprintf(&b, " confidence=%v", *n.Confidence)
			}
			if n.EstimatedTime != nil {
				fmt.Fprintf(&b, " estimated_time=%v", *n.EstimatedTime)
			}
			if n.Late {
				b.WriteString(" late=true")
			}
			b.WriteString("\n")
		}
	}
	if len(p.Forms) > 0 {
		fmt.Fprintf(&b, "forms: %s\n", strings.Join(p.Forms, ","))
	}
	if k := p.Kernel; k != nil {
		fmt.Fprintf(&b, "kernel: action=%s class=%s required=%d counted=%d approved=%t form=%s\n", k.ActionType, k.ApprovalClass, k.Required, k.Counted, p.Approved != nil && *p.Approved, k.Form)
		fmt.Fprintf(&b, "kernel: method=%s params=%s", p.Method, p.Params)
		if t := k.Target; t != nil {
			fmt.Fprintf(&b, " target=%s/%s@%s", t.ResourceType, t.ResourceID, t.Domain)
		}
		if len(k.Approvers) > 0 {
			fmt.Fprintf(&b, " approvers=%s", strings.Join(k.Approvers, ","))
		}
		if k.ValidFromMs != 0 || k.ValidUntilMs != 0 {
			fmt.Fprintf(&b, " window=%d..%d", k.ValidFromMs, k.ValidUntilMs)
		}
		if k.Intent != "" {
			fmt.Fprintf(&b, " intent=%q", k.Intent)
		}
		b.WriteString("\n")
		for _, a := range p.Approvals {
			fmt.Fprintf(&b, "approval: %s from=%s counted=%t", a.Event, a.From, a.Counted)
			if a.Late {
				b.WriteString(" late=true")
			}
			if a.Why != "" {
				fmt.Fprintf(&b, " why=%q", a.Why)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func formatEntry(h api.HistoryEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s from=%s %s", h.Seq, h.ID, h.Type, h.From, h.Effect)
	if h.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", h.Reason)
	}
	if h.Code != "" {
		fmt.Fprintf(&b, " code=%s", h.Code)
	}
	if len(h.Anomalies) > 0 {
		fmt.Fprintf(&b, " anomalies=%s", strings.Join(h.Anomalies, ","))
	}
	if h.Target != "" {
		fmt.Fprintf(&b, " target=%s", h.Target)
	}
	if h.Outcome != "" {
		fmt.Fprintf(&b, " outcome=%s", h.Outcome)
	}
	if h.Text != "" {
		fmt.Fprintf(&b, " text=%q", h.Text)
	}
	if h.ResolvedSeq != 0 {
		fmt.Fprintf(&b, " resolved_at=%d", h.ResolvedSeq)
	}
	if h.Form != "" {
		fmt.Fprintf(&b, " form=%s", h.Form)
	}
	if h.Note != "" {
		fmt.Fprintf(&b, " note=%s", h.Note)
	}
	if h.Status != "" {
		fmt.Fprintf(&b, " status=%s", h.Status)
	}
	if h.Detail != "" {
		fmt.Fprintf(&b, " (%s)", h.Detail)
	}
	b.WriteString("\n")
	return b.String()
}

func formatStats(s *api.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "proposals=%d events=%d orphans_waiting=%d", s.Proposals, s.Events, s.OrphansWaiting)
	if s.Gaps != 0 {
		fmt.Fprintf(&b, " gaps=%d", s.Gaps)
	}
	if s.MarksIgnored != 0 {
		fmt.Fprintf(&b, " marks_ignored=%d", s.MarksIgnored)
	}
	b.WriteString("\n")
	line := func(name string, m map[string]int64) {
		var parts []string
		for _, k := range sortedKeys(m) {
			if m[k] != 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "%s: %s\n", name, strings.Join(parts, " "))
		}
	}
	line("by_state", s.ByState)
	line("rejection_reasons", s.RejectionReasons)
	line("withdrawal_reasons", s.WithdrawalReasons)
	line("anomalies", s.Anomalies)
	line("events_by_type", s.EventsByType)
	line("effects", s.Effects)
	line("note_kinds", s.NoteKinds)
	return b.String()
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
