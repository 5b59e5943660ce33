package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mewledger/ledger/api"
)

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "-"
	}
	return strings.Join(xs, ", ")
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func renderProposal(w io.Writer, p *api.Proposal) error {
	tw := table(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("ID", p.ID)
	row("Space", p.Space)
	row("State", string(p.State))
	row("Proposer", p.Proposer)
	row("To", list(p.To))
	row("Method", orDash(p.Method))
	if len(p.Params) > 0 && string(p.Params) != "null" {
		row("Params", oneLine(string(p.Params)))
	}
	row("Dialect", p.Dialect)
	row("Created", fmt.Sprintf("seq %d at %s", p.CreatedSeq, when(p.CreatedAt)))
	row("Updated", fmt.Sprintf("seq %d at %s", p.UpdatedSeq, when(p.UpdatedAt)))
	if p.DecidedBy != "" || p.DecidedEvent != "" {
		row("Decided", fmt.Sprintf("by %s (event %s)", orDash(p.DecidedBy), orDash(p.DecidedEvent)))
	}
	if p.Reason != "" {
		row("Reason", p.Reason)
	}
	if p.Withdrawal != nil && p.Withdrawal.Explanation != "" {
		row("Explanation", oneLine(p.Withdrawal.Explanation))
	}
	if p.ExpiresAt != nil {
		row("Expires", when(*p.ExpiresAt))
	}
	if p.Kernel != nil {
		k := p.Kernel
		target := "-"
		if k.Target != nil {
			target = fmt.Sprintf("%s %s at %s", k.Target.ResourceType, k.Target.ResourceID, k.Target.Domain)
		}
		row("Action", fmt.Sprintf("%s on %s", k.ActionType, target))
		row("Approval", fmt.Sprintf("%s (%d required)", orDash(string(k.ApprovalClass)), k.Required))
	}
	if p.Approved != nil {
		row("Approved", yesNo(*p.Approved))
	}
	if len(p.Targets) > 0 {
		ts := make([]string, len(p.Targets))
		for i, t := range p.Targets {
			ts[i] = t.ID + " (" + strings.Join(t.Sources, ", ") + ")"
		}
		row("Targets", strings.Join(ts, "; "))
	}
	if x := p.Exclusive; x != nil {
		until := "no timeout"
		if x.Until != nil {
			until = "until " + when(*x.Until)
		}
		row("Exclusive", fmt.Sprintf("%s, fallback to broadcast %s", until, yesNo(x.FallbackToBroadcast)))
	}
	if len(p.Statuses) > 0 {
		ss := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			ss[i] = st.From + "=" + st.Status
		}
		row("Statuses", strings.Join(ss, ", "))
	}
	if len(p.Forms) > 0 {
		row("Forms", strings.Join(p.Forms, ", "))
	}
	row("Anomalies", list(p.Anomalies))
	row("Events", strconv.Itoa(p.Events))
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := renderHoleCrossing(w, p.HoleCrossing); err != nil {
		return err
	}
	if len(p.Fulfillments) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "FULFILMENT\tSEQ\tFROM\tLATE\tOUTCOME\tANOMALIES\tRESPONSES")
		for _, f := range p.Fulfillments {
			rs := make([]string, len(f.Responses))
			for i, r := range f.Responses {
				rs[i] = r.Event + " " + r.From + " " + orDash(r.Outcome)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", f.Event, f.Seq, f.From, yesNo(f.Late), orDash(f.Outcome), list(f.Anomalies), list(rs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(p.Rejections) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "REJECTION\tSEQ\tFROM\tREASON\tLATE\tEXPLANATION")
		for _, r := range p.Rejections {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Event, r.Seq, r.From, orDash(r.Reason), yesNo(r.Late), orDash(oneLine(r.Explanation)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var notes []api.FormNote
	notes = append(append(append(notes, p.Acceptances...), p.Deferrals...), p.Bids...)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "NOTE\tSEQ\tFROM\tFORM\tKIND\tLATE\tDETAIL")
		for _, l := range []struct {
			kind string
			ns   []api.FormNote
		}{{"accept", p.Acceptances}, {"defer", p.Deferrals}, {"bid", p.Bids}} {
			for _, n := range l.ns {
				var d []string
				if n.Reason != "" {
					d = append(d, "reason="+n.Reason)
				}
				if n.Confidence != nil {
					d = append(d, "confidence="+strconv.FormatFloat(*n.Confidence, 'g', -1, 64))
				}
				if n.EstimatedTime != nil {
					d = append(d, "estimated_time="+strconv.FormatFloat(*n.EstimatedTime, 'g', -1, 64))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n.Event, n.Seq, n.From, n.Form, l.kind, yesNo(n.Late), list(d))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(p.Approvals) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "APPROVAL\tSEQ\tFROM\tCOUNTED\tREASON")
		for _, a := range p.Approvals {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", a.Event, a.Seq, a.From, yesNo(a.Counted), orDash(oneLine(a.Reason)))
		}
		return tw.Flush()
	}
	return nil
}

// historyNote is the last column of a history row.
func historyNote(h api.HistoryEntry) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("reason", h.Reason)
	add("code", h.Code)
	add("target", h.Target)
	add("outcome", h.Outcome)
	add("form", h.Form)
	if h.Note != "" && h.Note != h.Status {
		add("note", h.Note)
	}
	add("status", h.Status)
	if h.Text != "" {
		parts = append(parts, strconv.Quote(oneLine(h.Text)))
	}
	if len(h.Anomalies) > 0 {
		add("anomalies", strings.Join(h.Anomalies, ","))
	}
	if h.Detail != "" {
		parts = append(parts, "("+oneLine(h.Detail)+")")
	}
	return strings.Join(parts, " ")
}

func renderHistory(w io.Writer, id, space string, events []api.HistoryEntry) error {
	fmt.Fprintf(w, "History of %s in space %s\n\n", id, space)
	tw := table(w)
	fmt.Fprintln(tw, "SEQ\tAT\tTYPE\tID\tFROM\tEFFECT\tNOTE")
	for _, e := range events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, when(e.At), e.Type, e.ID, e.From, e.Effect, historyNote(e))
	}
	return tw.Flush()
}

func renderList(w io.Writer, ps []*api.Proposal) error {
	tw := table(w)
	fmt.Fprintln(tw, "ID\tSTATE\tPROPOSER\tMETHOD\tCREATED\tEVENTS\tANOMALIES")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.ID, p.State, p.Proposer, orDash(p.Method), when(p.CreatedAt), p.Events, list(p.Anomalies))
	}
	return tw.Flush()
}

// counts renders a map section with its keys in the given order first,
// then any other keys sorted.
func counts(tw io.Writer, title string, m map[string]int64, order []string) {
	fmt.Fprintf(tw, "%s\tCOUNT\n", title)
	seen := map[string]bool{}
	for _, k := range order {
		if v, ok := m[k]; ok {
			fmt.Fprintf(tw, "%s\t%d\n", k, v)
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sortStrings(rest)
	for _, k := range rest {
		fmt.Fprintf(tw, "%s\t%d\n", k, m[k])
	}
	if len(m) == 0 {
		fmt.Fprintf(tw, "-\t0\n")
	}
	fmt.Fprintln(tw)
}

func renderStats(w io.Writer, space string, st *api.Stats) error {
	fmt.Fprintf(w, "Space %s: %d proposals, %d events, %d orphans waiting, %d recording gaps\n\n", orDash(space), st.Proposals, st.Events, st.OrphansWaiting, st.Gaps)
	tw := table(w)
	states := make([]string, len(api.States))
	for i, s := range api.States {
		states[i] = string(s)
	}
	counts(tw, "STATE", st.ByState, states)
	counts(tw, "REJECTION REASON", st.RejectionReasons, nil)
	counts(tw, "WITHDRAWAL REASON", st.WithdrawalReasons, nil)
	counts(tw, "ANOMALY", st.Anomalies, nil)
	counts(tw, "EVENT TYPE", st.EventsByType, nil)
	counts(tw, "EFFECT", st.Effects, nil)
	if len(st.NoteKinds) > 0 {
		counts(tw, "NOTE KIND", st.NoteKinds, nil)
	}
	return tw.Flush()
}
