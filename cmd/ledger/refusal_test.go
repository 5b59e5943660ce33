package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// TestRefusalReadMidBody (issue 36 item 1): a CLI and a Go client whose
// request is refused while its body is still being sent report the
// ledger's refusal, every time: `ledger publish` with an auditor's token
// (403, a small body and one larger than what the server reads after
// refusing), the client's AppendStream likewise, and an envelope over
// the size limit (413 after the first MiB). Before the refusal was
// closed gracefully, the CLI printed "write: broken pipe" in some runs.
func TestRefusalReadMidBody(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_DATA", "LEDGER_NATS_URL", "LEDGER_SPACE"} {
		t.Setenv(v, "")
	}
	o := apptest.Options(t)
	authFile, _ := quickAuth(t)
	if err := applyAuth(&o, authFile, "", "", limitFlags{}, natstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	a := apptest.StartWith(t, o)
	apiURL := a.HTTPURL()
	audit, writer := secret(t, "audit-team.token"), secret(t, "ci-writer.token")
	small, err := os.ReadFile("../../examples/kernel-proposals.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Larger than what the server reads and discards after a refusal
	// (connbudget.LingerBytes, 4 MiB).
	var big bytes.Buffer
	for i := 0; big.Len() < 6<<20; i++ {
		fmt.Fprintf(&big, `{"protocol":"mew/v0.4","id":"big-%d","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"m","params":{"pad":"%s"}}}`+"\n", i, strings.Repeat("x", 200))
	}
	ctx := context.Background()
	audCl, err := client.New(apiURL, client.WithToken(audit))
	if err != nil {
		t.Fatal(err)
	}
	wCl, err := client.New(apiURL, client.WithToken(writer))
	if err != nil {
		t.Fatal(err)
	}
	oversize := []byte(`{"protocol":"mew/v0.4","id":"huge","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"m","params":{"pad":"` + strings.Repeat("x", 3<<20) + `"}}}`)
	const runs = 50
	for i := range runs {
		for _, body := range []struct {
			name string
			data string
		}{{"small", string(small)}, {"6 MiB", big.String()}} {
			code, _, stderr := runCLIToken(t, audit, body.data, "publish", "--api", apiURL)
			if code != exitFailed || !strings.Contains(stderr, "forbidden") {
				t.Fatalf("run %d: publish (%s) with the auditor's token: %d %s", i, body.name, code, stderr)
			}
		}
		err := audCl.AppendStream(ctx, bytes.NewReader(big.Bytes()), func(api.AppendResult) error { return nil })
		if !errors.Is(err, api.ErrForbidden) {
			t.Fatalf("run %d: AppendStream with the auditor's token: %v, want the 403", i, err)
		}
		_, err = wCl.Append(ctx, oversize)
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 413 || e.Code != "oversize" {
			t.Fatalf("run %d: Append of 3 MiB: %v, want 413 oversize", i, err)
		}
	}
}
