package appendlog_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// TestPrepareBodyUsesAppenderOptions: the Appender's PrepareBody is
// ledger.PrepareBodyStandalone with the Appender's default space, limits
// and clock (the pure function's own tests, in package ledger, cover the
// dialects and refusals); an explicit space wins over the default.
func TestPrepareBodyUsesAppenderOptions(t *testing.T) {
	now := time.Date(2024, 1, 13, 18, 41, 0, 0, time.UTC)
	limits := ledger.SubmitLimits{MaxBytes: 4096}
	_, js := natstest.Connect(t, natstest.Start(t))
	a := newAppender(t, js, appendlog.AppenderOptions{Space: "s1", Limits: limits, Now: func() time.Time { return now }})
	bare, err := os.ReadFile(filepath.Join("..", "testdata", "kernel", "seed-proposal.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, space := range []string{"", "s2"} {
		got, err := a.PrepareBody(space, bare, ledger.BodyOptions{})
		if err != nil {
			t.Fatalf("space %q: %v", space, err)
		}
		wantSpace := space
		if space == "" {
			wantSpace = "s1"
		}
		want, err := ledger.PrepareBodyStandalone(wantSpace, bare, ledger.BodyOptions{}, limits, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.Space != wantSpace || !reflect.DeepEqual(got, want) {
			t.Fatalf("space %q: PrepareBody gave\n%+v\nPrepareBodyStandalone\n%+v", space, got, want)
		}
	}
	big := make([]byte, 5000)
	copy(big, `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`)
	if _, err := a.PrepareBody("", big, ledger.BodyOptions{}); err == nil {
		t.Fatal("a body over the Appender's MaxBytes was prepared")
	} else if r, ok := ledger.AsRefusal(err); !ok || r.Code != api.CodeOversize {
		t.Fatalf("over MaxBytes: %v, want %s", err, api.CodeOversize)
	}
}
