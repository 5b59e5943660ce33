package submit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/subjects"
)

func batchEnv(id string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"agent-b","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"x"}}}`, id)
}

func batchReply(t *testing.T, msg *nats.Msg) []api.AppendResult {
	t.Helper()
	var out []api.AppendResult
	sc := bufio.NewScanner(bytes.NewReader(msg.Data))
	for sc.Scan() {
		var r api.AppendResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply line %q: %v", sc.Bytes(), err)
		}
		out = append(out, r)
	}
	return out
}

// TestSubmitBatch: a batch request (NDJSON with its Content-Type, or a
// JSON array) is appended in order and answered with one result per
// envelope naming its line; a refused line does not stop the others.
func TestSubmitBatch(t *testing.T) {
	nc, _, subjectOf := setup(t)

	lines := []string{batchEnv("b-1"), `{"protocol":"mew/v0.4"}`, "", batchEnv("b-2"), batchEnv("b-1")}
	m := nats.NewMsg(subjects.Submit("default"))
	m.Header.Set(submit.HeaderContentType, "application/x-ndjson")
	m.Data = []byte(strings.Join(lines, "\n"))
	msg, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := batchReply(t, msg)
	if len(got) != 4 {
		t.Fatalf("%d results: %s", len(got), msg.Data)
	}
	want := []struct {
		line int
		seq  uint64
		dup  bool
		err  bool
	}{{1, 1, false, false}, {2, 0, false, true}, {4, 2, false, false}, {5, 1, true, false}}
	for i, w := range want {
		g := got[i]
		if g.Line != w.line || g.Seq != w.seq || g.Duplicate != w.dup || (g.Error != nil) != w.err {
			t.Fatalf("result %d: %+v, want %+v", i, g, w)
		}
	}
	if s, err := subjectOf("2"); err != nil || !strings.Contains(s, "b-2") {
		t.Fatalf("seq 2 on %q (%v)", s, err)
	}

	// A JSON array, with its Content-Type.
	jsonReq := func(body string) *nats.Msg {
		m := nats.NewMsg(subjects.Submit("default"))
		m.Header.Set(submit.HeaderContentType, "application/json")
		m.Data = []byte(body)
		msg, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	arr := "[" + batchEnv("a-1") + "," + batchEnv("a-2") + "]"
	got = batchReply(t, jsonReq(arr))
	if len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 || got[0].Line != 1 || got[1].Line != 2 {
		t.Fatalf("array results %+v", got)
	}

	// Too many envelopes: the whole request refused.
	big := "[" + strings.Repeat(batchEnv("x")+",", submit.MaxBatchEnvelopes) + batchEnv("x") + "]"
	r, err := submit.ParseReply(jsonReq(big).Data)
	if err != nil || r.Error == nil || r.Error.Code != "too_many" {
		t.Fatalf("oversized batch: %+v (%v)", r, err)
	}
	// Without the header a top-level array is one (refused) envelope.
	r, err = submit.ParseReply(request(t, nc, subjects.Submit("default"), arr).Data)
	if err != nil || r.Error == nil || r.Error.Code != "not_json" {
		t.Fatalf("array without Content-Type: %+v (%v)", r, err)
	}
}
