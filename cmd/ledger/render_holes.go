package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mewledger/ledger/api"
)

// renderHoleCrossing writes the section of `ledger get` saying that the
// proposal's lifecycle crosses recording holes (api.HoleCrossing): its
// span and each hole's window and recorders in gap.
func renderHoleCrossing(w io.Writer, c *api.HoleCrossing) error {
	if c == nil || len(c.Holes) == 0 {
		return nil
	}
	span := fmt.Sprintf("seq %d to seq %d", c.FirstSeq, c.LastSeq)
	if c.Open {
		span = fmt.Sprintf("seq %d to the log's end (pending; its last event is seq %d)", c.FirstSeq, c.LastSeq)
	}
	fmt.Fprintf(w, "\nIts lifecycle (%s) crosses %d recording hole(s): an envelope of it carried then may be missing.\n", span, len(c.Holes))
	tw := table(w)
	fmt.Fprintln(tw, "HOLE\tMEW SPACE\tAFTER\tBEFORE\tRECORDERS IN GAP")
	edge := func(e *api.HoleEdge, none string) string {
		if e == nil {
			return none
		}
		if e.ID == "" {
			return fmt.Sprintf("seq %d", e.Seq)
		}
		return fmt.Sprintf("seq %d %s", e.Seq, e.ID)
	}
	for i, h := range c.Holes {
		before := edge(h.Before, "still open")
		if h.Open {
			before = "still open"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, h.MEWSpace, edge(h.After, "log start"), before, orDash(strings.Join(h.Recorders, ", ")))
	}
	return tw.Flush()
}
