package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

// `ledger publish -f` of the same file again is answered duplicate:true
// with the same sequences, for ever (contract §4, issue 23 item 8): after the
// stream's duplicate window (1s here, --dup-window), after a restart and
// after an offline rebuild; nothing is stored twice and the proposal's
// event count does not grow.
func TestPublishSameFileAgainIsDuplicateForEver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	data := filepath.Join(dir, "data")
	file, err := filepath.Abs(filepath.Join("..", "..", "examples", "withdraw.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const window = time.Second
	s := startServer(t, bin, data, "--dup-window", window.String())

	publishFile := func(s *server) []api.AppendResult {
		t.Helper()
		r := s.cli("", "publish", "-f", file)
		if r.code != 0 {
			t.Fatalf("publish -f: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		var out []api.AppendResult
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		for dec.More() {
			var res api.AppendResult
			if err := dec.Decode(&res); err != nil {
				t.Fatalf("publish output %q: %v", r.stdout, err)
			}
			out = append(out, res)
		}
		return out
	}
	first := publishFile(s)
	if len(first) != 3 {
		t.Fatalf("first publish: %+v", first)
	}
	for _, r := range first {
		if r.Duplicate || r.Error != nil {
			t.Fatalf("first publish: %+v", first)
		}
	}
	p, _ := s.getJSON("env-req-2", first[2].Seq)
	events := p.Events
	again := func(s *server, when string) {
		t.Helper()
		time.Sleep(2 * window) // NATS has forgotten the Nats-Msg-Ids
		res := publishFile(s)
		if len(res) != len(first) {
			t.Fatalf("%s: %+v", when, res)
		}
		for i, r := range res {
			if r.Error != nil || !r.Duplicate || r.Seq != first[i].Seq {
				t.Errorf("%s: line %d %+v, want duplicate:true at seq %d", when, i+1, r, first[i].Seq)
			}
		}
		if p, _ := s.getJSON("env-req-2", first[2].Seq); p.Events != events {
			t.Errorf("%s: env-req-2 has %d events, want %d", when, p.Events, events)
		}
	}
	again(s, "after the window")
	s.stop()
	s = startServer(t, bin, data, "--dup-window", window.String())
	again(s, "after a restart")
	s.stop()
	if r := s.cli("", "rebuild", "--data", data); r.code != 0 {
		t.Fatalf("offline rebuild: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s = startServer(t, bin, data, "--dup-window", window.String())
	again(s, "after a rebuild")
	// Nothing was stored twice: the next append takes sequence 4.
	res, _ := s.publish(0, `{"protocol":"mew/v0.4","id":"after-all","from":"agent-a","kind":"mcp/proposal","payload":{"method":"m"}}`)
	if len(res) != 1 || res[0].Seq != 4 {
		t.Fatalf("next append: %+v, want seq 4", res)
	}
	s.stop()
}

func TestServeDupWindowFlag(t *testing.T) {
	for _, v := range []string{"soon", "-1s", "10ms"} {
		code, _, stderr := runCLI(t, "", "serve", "--data", t.TempDir(), "--dup-window", v)
		if code != exitUsage || !strings.Contains(stderr, "dup") {
			t.Errorf("serve --dup-window %s: exit %d, stderr %s", v, code, stderr)
		}
	}
	_, out, _ := runCLI(t, "", "help", "serve")
	for _, want := range []string{"--dup-window DURATION", "LEDGER_DUP_WINDOW", "duplicate for ever"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve help lacks %q", want)
		}
	}
}
