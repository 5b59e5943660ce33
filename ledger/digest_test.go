package ledger_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/canon"
)

// referenceDigest is how Decoded.Digest was first computed: the canonical
// form of json.Marshal of the normalised envelope without ts and protocol.
// Decode now builds that canonical text directly; it must hash the same
// bytes, or every Nats-Msg-Id and stored digest would change.
func referenceDigest(t *testing.T, env ledger.Envelope) string {
	t.Helper()
	env.TS, env.Protocol = "", ""
	b, err := json.Marshal(&env)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = canon.Canonical(b); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestDigestMatchesReference(t *testing.T) {
	var inputs [][]byte
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		inputs = append(inputs, c.Data)
	}
	for _, mix := range []workload.Mix{workload.BenchMix, {Fulfil: 10, Withdraw: 10, Reject: 10, Response: 10, Chat: 10}} {
		g := workload.New(workload.Options{Seed: 2, Mix: mix, PadTo: 600, Disorder: 10, Duplicates: 5, Foreign: 10})
		inputs = append(inputs, g.Batch(1000)...)
	}
	inputs = append(inputs,
		[]byte(`{"protocol":"mcpx/v0.1","id":"p\u0031","from":"a<b>&","kind":"mcp/proposal:tools/call:ctx","to":["x","y\u2028"],"payload":{"params":{"z":1,"a":"\u00e9\n"}}}`),
		[]byte(`{"protocol":"mcpx/v0.1","id":"p2","from":"a","kind":"mcp/request:tools/call","correlation_id":"p1","payload":{"method":null}}`),
		ledger.ExpireEnvelope("sp\u00e9ce", "id\t1", time.Unix(1, 2)),
	)
	checked := 0
	for _, raw := range inputs {
		d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: time.Unix(1e9, 0)})
		if err != nil {
			continue
		}
		if want := referenceDigest(t, d.Env); d.Digest != want {
			t.Fatalf("digest of %q: %s, want %s", raw, d.Digest, want)
		}
		checked++
	}
	if checked < 2000 {
		t.Fatalf("only %d envelopes decoded", checked)
	}
}
