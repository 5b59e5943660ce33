package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testdata/seed-examples holds every JSON example of the three design
// records whose lifecycle forms contract §2 lists (ADR-v2c, ADR-005, the
// targeted-proposals decision), copied verbatim from their ```json blocks,
// with a first line naming the protocol of the record's era. The examples
// are printed the way design documents print JSON: // comments, "{ ... }"
// for "anything", and "a" | "b" for alternatives.

var (
	seedComment  = regexp.MustCompile(`(?m)//[^\n]*$`)
	seedEllipsis = regexp.MustCompile(`\{\s*\.\.\.\s*\}`)
	seedAlts     = regexp.MustCompile(`"[^"\n]*"(?:\s*\|\s*"[^"\n]*")+`)
)

// seedExamples reads the examples of one file: each JSON object of the
// block, once per alternative of its "a" | "b" choices, with what the
// printed fragment leaves out (protocol, id, from) filled in.
func seedExamples(t *testing.T, path string) (names []string, envs [][]byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(data), "\n")
	protocol := strings.TrimSpace(strings.TrimPrefix(head, "protocol-if-missing:"))
	body = seedComment.ReplaceAllString(body, "")
	body = seedEllipsis.ReplaceAllString(body, "{}")
	// Expand the alternatives of the block: one body per choice of each
	// "a" | "b" group.
	bodies := []string{body}
	for {
		var next []string
		expanded := false
		for _, b := range bodies {
			alts := seedAlts.FindString(b)
			if alts == "" {
				next = append(next, b)
				continue
			}
			expanded = true
			for _, a := range strings.Split(alts, "|") {
				next = append(next, strings.Replace(b, alts, strings.TrimSpace(a), 1))
			}
		}
		bodies = next
		if !expanded {
			break
		}
	}
	seen := map[string]bool{}
	for v, b := range bodies {
		dec := json.NewDecoder(strings.NewReader(b))
		for n := 1; ; n++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: example %d is not JSON once comments, { ... } and alternatives are read as such: %v", path, n, err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s example %d: %v", path, n, err)
			}
			for k, def := range map[string]string{"protocol": protocol, "id": fmt.Sprintf("seed-%d-%d", n, v+1), "from": "seed-agent"} {
				if _, ok := m[k]; !ok {
					m[k] = def
				}
			}
			env, _ := json.Marshal(m)
			key := string(raw)
			if seen[key] {
				continue
			}
			seen[key] = true
			names, envs = append(names, fmt.Sprintf("%s#%d.%d", filepath.Base(path), n, v+1)), append(envs, env)
		}
	}
	return names, envs
}

// TestSeedExamplesAccepted: every example of the design records' option
// sections is accepted by the submit paths (Decode and Submittable) as
// printed, and classified as a lifecycle event: none is refused or
// ignored.
func TestSeedExamplesAccepted(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "seed-examples", "*.txt"))
	if len(files) < 10 {
		t.Fatalf("only %d seed example files", len(files))
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	total := 0
	byType := map[Type]int{}
	for _, f := range files {
		names, envs := seedExamples(t, f)
		for i, raw := range envs {
			total++
			p, err := PrepareStandalone("default", raw, SubmitLimits{}, now)
			if err != nil {
				t.Errorf("%s: %s refused: %v", names[i], raw, err)
				continue
			}
			byType[p.Decoded.Type]++
			if bytes.Contains(raw, []byte(`"kind":"proposal"`)) && p.Decoded.Form != FormBareProposal {
				t.Errorf("%s: form %q", names[i], p.Decoded.Form)
			}
		}
	}
	t.Logf("%d examples: %v", total, byType)
	for _, typ := range []Type{TypeProposal, TypeWithdraw, TypeReject, TypeNote} {
		if byType[typ] == 0 {
			t.Errorf("no example classified %s: %v", typ, byType)
		}
	}
}

// TestDecodeForms: the fuzz seeds of each new shape (testdata/forms) decode
// to the type and form their name says, and their canonical form decodes
// again to the same event.
func TestDecodeForms(t *testing.T) {
	want := map[string]struct {
		typ  Type
		form string
	}{
		"form-lifecycle-withdraw.json": {TypeWithdraw, "meup.lifecycle/withdraw"},
		"form-lifecycle-reject.json":   {TypeReject, "meup.lifecycle/reject"},
		"form-lifecycle-status.json":   {TypeNote, "meup.lifecycle/status"},
		"form-lifecycle-claim.json":    {TypeNote, "meup.lifecycle/claim"},
		"form-proposal-status.json":    {TypeWithdraw, FormProposalStatus},
		"form-mcp-cancelled.json":      {TypeWithdraw, FormMCPCancelled},
		"form-proposal-response.json":  {TypeNote, FormProposalResponse},
		"form-bid.json":                {TypeNote, FormBid},
		"form-bare-proposal-ttl.json":  {TypeProposal, FormBareProposal},
		"form-targeting.json":          {TypeProposal, ""},
		"gap.json":                     {TypeGap, ""},
		"response-tool-error.json":     {TypeResponse, ""},
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "forms", "*.json"))
	if len(files) != len(want) {
		t.Fatalf("%d files in testdata/forms, %d expected", len(files), len(want))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(raw, DecodeOptions{})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		w := want[filepath.Base(f)]
		if d.Type != w.typ || d.Form != w.form {
			t.Errorf("%s: %s %q, want %s %q", f, d.Type, d.Form, w.typ, w.form)
		}
		if filepath.Base(f) == "response-tool-error.json" && d.Outcome != "failed" {
			t.Errorf("tool error outcome %q", d.Outcome)
		}
		if filepath.Base(f) == "form-targeting.json" && (len(d.TargetSources) != 4 || d.Targeting == nil || !d.Targeting.Exclusive || d.Targeting.FallbackToBroadcast || d.Targeting.WindowMs != 3000) {
			t.Errorf("targeting %+v %+v", d.TargetSources, d.Targeting)
		}
		assertRoundTrip(t, d)
	}
}
