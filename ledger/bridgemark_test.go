package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/mewledger/ledger/ledger"
)

// TestBridgeMark: a mark survives its encoding; malformed ones are
// refused naming the header.
func TestBridgeMark(t *testing.T) {
	m := ledger.BridgeMark{Bridge: "récorder", MEWSpace: "a&b=c", Session: "s1", Received: time.Unix(0, 1795617917349227781).UTC()}
	got, err := ledger.ParseBridgeMark(m.String())
	if err != nil || got != m {
		t.Fatalf("%q: %+v %v", m.String(), got, err)
	}
	for _, bad := range []string{"", "b=x", "s=1", "b=ledger&s=1", "b=x&s=1&r=-4", "b=x&s=1&r=soon", "%zz"} {
		_, err := ledger.ParseBridgeMark(bad)
		var re *ledger.RefusalError
		if !errors.As(err, &re) || re.Field != ledger.HeaderBridge {
			t.Errorf("%q: %v, want a refusal naming %s", bad, err, ledger.HeaderBridge)
		}
	}
}

// FuzzParseBridgeMark: any header value parses or is refused, never
// panics, and what parses encodes back to a value that parses the same.
func FuzzParseBridgeMark(f *testing.F) {
	f.Add("b=rec&m=space&s=1795617917349227781-da5bfde2&r=1795617917349227781")
	f.Add("b=%C3%A9&s=x")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ledger.ParseBridgeMark(s)
		if err != nil {
			return
		}
		again, err := ledger.ParseBridgeMark(m.String())
		if err != nil || again != m {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", s, m, m.String(), again, err)
		}
	})
}
