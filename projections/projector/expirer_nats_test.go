package projector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/projector"
)

// TestExpirerPagesThroughEveryDueDeadline (issue 15, item 3): with more
// due deadlines than a page, across spaces, one scan appends the expiry
// of every one of them, including those after a first page whose
// expiries are not folded yet (they used to starve everything after the
// first 1000 due of all spaces).
func TestExpirerPagesThroughEveryDueDeadline(t *testing.T) {
	r := newRig(t)
	s := openStore(t, t.TempDir())
	stop := runProjector(t, r.js, s, projector.Options{})
	ctx := context.Background()
	var last uint64
	want := map[string]bool{}
	for _, space := range []string{"alpha", "beta", "gamma"} {
		var raws [][]byte
		for i := range 4 {
			id := fmt.Sprintf("p%d", i)
			raws = append(raws, []byte(fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"a","kind":"mcp/proposal","payload":{"method":"m","ttl_ms":1}}`, id)))
			want[space+"/"+id] = true
		}
		for i, res := range r.app.AppendMany(ctx, space, raws) {
			if res.Err != nil {
				t.Fatalf("append %d: %v", i, res.Err)
			}
			last = max(last, res.Seq)
		}
	}
	waitApplied(t, s, last)
	stop() // nothing the expirer appends is folded: every page stays due

	clock := func() time.Time { return time.Now().Add(time.Second) }
	ex, err := projector.NewExpirer(s, r.app, projector.ExpirerOptions{Batch: 5, Grace: time.Millisecond, Retry: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	n, err := ex.Scan(ctx)
	if err != nil || n != len(want) {
		t.Fatalf("first scan appended %d (%v), want all %d due expiries", n, err, len(want))
	}
	// A second scan within Retry appends nothing again.
	if n, err := ex.Scan(ctx); err != nil || n != 0 {
		t.Fatalf("second scan appended %d (%v), want 0", n, err)
	}
	runProjector(t, r.js, s, projector.Options{})
	waitApplied(t, s, last+uint64(len(want)))
	for k := range want {
		space, id, _ := strings.Cut(k, "/")
		p, err := s.Get(space, id)
		if err != nil || p.State != api.StateExpired {
			t.Fatalf("%s: %+v (%v), want expired", k, p, err)
		}
	}
}
