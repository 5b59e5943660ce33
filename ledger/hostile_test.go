package ledger_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// knownCodes are the refusal codes a corpus directory may be named after.
var knownCodes = map[string]bool{
	api.CodeNotJSON: true, api.CodeInvalidUTF8: true, api.CodeOversize: true,
	api.CodeUnknownProtocol: true, api.CodeMissingField: true, api.CodeWrongType: true,
	api.CodeTooLong: true, api.CodeTooMany: true, api.CodeBadValue: true,
	api.CodeNotLifecycle: true, api.CodeMissingCorrelation: true, api.CodeReservedKind: true,
	api.CodeDialectMismatch: true, api.CodeUnknownField: true, badinput.Accepted: true,
}

var vpropRule = regexp.MustCompile(`^V-PROP-0[01][0-9]$`)

// TestHostileCorpusShape: the corpus is big enough, covers what the issue
// lists, and every case names an expected outcome the ledger knows.
func TestHostileCorpusShape(t *testing.T) {
	cases := badinput.MustLoad(t)
	if len(cases) < 200 {
		t.Fatalf("corpus has %d cases, want at least 200", len(cases))
	}
	byWant := map[string]int{}
	names := map[string]bool{}
	for _, c := range cases {
		if !knownCodes[c.Want] && !vpropRule.MatchString(c.Want) {
			t.Errorf("%s: unknown expected outcome %q", c.Name, c.Want)
		}
		if names[c.Name] {
			t.Errorf("%s: duplicate name", c.Name)
		}
		names[c.Name] = true
		byWant[c.Want]++
		if !c.Generated && len(c.Data) > 8<<10 {
			t.Errorf("%s: %d bytes committed; generate big cases (generated.txt) instead", c.Name, len(c.Data))
		}
	}
	for _, want := range []string{"V-PROP-001", "V-PROP-002", "V-PROP-003", "V-PROP-004", "V-PROP-005", "V-PROP-006",
		"V-PROP-010", "V-PROP-011", "V-PROP-012", "V-PROP-013", "V-PROP-014",
		api.CodeNotJSON, api.CodeInvalidUTF8, api.CodeOversize, api.CodeTooMany, api.CodeTooLong,
		api.CodeDialectMismatch, api.CodeReservedKind, api.CodeNotLifecycle, badinput.Accepted} {
		if byWant[want] == 0 {
			t.Errorf("no case expects %s", want)
		}
	}
	for _, must := range []string{"generated/nest-arrays-10000-in-params", "generated/envelope-1mib-plus-1-byte",
		"generated/params-array-100000-elements", "generated/to-10000-entries", "not_json/empty-body.bin",
		"not_json/bom-prefixed-envelope.json", "invalid_utf8/lone-high-surrogate-escape-in-id.json",
		"reserved_kind/expire-from-agent.json", "accepted/id-with-dots.json", "accepted/id-star.json",
		"accepted/id-gt.json", "accepted/id-with-spaces.json"} {
		if !names[must] {
			t.Errorf("corpus lacks %s", must)
		}
	}
	t.Logf("%d cases: %v", len(cases), byWant)
}

// fieldless are the codes whose refusal may have no field: the whole body
// is at fault.
var fieldless = map[string]bool{api.CodeNotJSON: true, api.CodeInvalidUTF8: true, api.CodeOversize: true}

// submitCheck is what every submit path runs: Decode, Submittable, limits.
// It returns the refusal, or nil and the decoded envelope.
func submitCheck(raw []byte) (*ledger.Decoded, *ledger.RefusalError, string) {
	d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: badinput.Now})
	stage := "decode"
	if err == nil {
		stage = "submittable"
		if err = ledger.Submittable(d); err == nil {
			stage = "limits"
			err = ledger.DefaultSubmitLimits().Check(raw, d)
		}
	}
	if err == nil {
		return d, nil, ""
	}
	r, ok := ledger.AsRefusal(err)
	if !ok {
		return nil, &ledger.RefusalError{Code: "NOT A REFUSAL: " + err.Error()}, stage
	}
	return d, r, stage
}

// TestHostileCorpusDecode: every case through Decode (and the submit
// checks) never panics, and gives exactly the expected outcome: a refusal
// whose code is the case's, with a message and — unless the whole body is
// at fault — the field; or, for hostile-but-legal input, an envelope whose
// subject round-trips.
func TestHostileCorpusDecode(t *testing.T) {
	for _, c := range badinput.MustLoad(t) {
		var (
			d     *ledger.Decoded
			r     *ledger.RefusalError
			stage string
		)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic: %v", c.Name, p)
				}
			}()
			d, r, stage = submitCheck(c.Data)
		}()
		if !c.Refused() {
			if r != nil {
				t.Errorf("%s: refused at %s: %v; want accepted", c.Name, stage, r)
				continue
			}
			checkRoundTrip(t, c.Name, d)
			continue
		}
		switch {
		case r == nil:
			t.Errorf("%s: accepted; want refusal %s", c.Name, c.Want)
			continue
		case r.Code != c.Want:
			t.Errorf("%s: refused at %s with %s (%s, field %q); want %s", c.Name, stage, r.Code, r.Message, r.Field, c.Want)
		case r.Message == "":
			t.Errorf("%s: refusal %s without a message", c.Name, r.Code)
		case r.Field == "" && !fieldless[r.Code]:
			t.Errorf("%s: refusal %s (%s) names no field", c.Name, r.Code, r.Message)
		case !errors.Is(r, ledger.ErrRefused):
			t.Errorf("%s: refusal does not match ErrRefused", c.Name)
		}
		if stage == "decode" {
			// Decode is pure: the same bytes give the same refusal.
			_, err2 := ledger.Decode(c.Data, ledger.DecodeOptions{Now: badinput.Now})
			if r2, _ := ledger.AsRefusal(err2); r2 == nil || !reflect.DeepEqual(*r2, *r) {
				t.Errorf("%s: second decode gave %v, first %v", c.Name, err2, r)
			}
		}
		// A refusal message is for a person: bounded, whatever the input.
		if len(r.Message) > 4096 || len(r.Field) > 4096 {
			t.Errorf("%s: refusal message %d bytes, field %d bytes: echoes the input", c.Name, len(r.Message), len(r.Field))
		}
	}
}

// checkRoundTrip: an accepted envelope's subject parses back to its key,
// type and sender, its canonical form decodes to the same event, and a
// second decode is identical.
func checkRoundTrip(t *testing.T, name string, d *ledger.Decoded) {
	t.Helper()
	ev := subjects.Event{Space: ledger.DefaultSpace, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}
	subj := ev.String()
	if n := strings.Count(subj, "."); n != 4 {
		t.Errorf("%s: subject %q has %d dots, want 4", name, subj, n)
	}
	if strings.ContainsAny(subj, " *>\t\r\n\x00") {
		t.Errorf("%s: subject %q contains a character NATS treats specially", name, subj)
	}
	back, err := subjects.ParseEvent(subj)
	if err != nil || back != ev {
		t.Errorf("%s: subject %q parses to %+v (%v), want %+v", name, subj, back, err, ev)
	}
	canon, err := json.Marshal(&d.Env)
	if err != nil {
		t.Errorf("%s: marshal canonical form: %v", name, err)
		return
	}
	d2, err := ledger.Decode(canon, ledger.DecodeOptions{Now: badinput.Now})
	if err != nil {
		t.Errorf("%s: canonical form %s does not decode: %v", name, canon, err)
		return
	}
	if d2.Digest != d.Digest || d2.Key != d.Key || d2.Type != d.Type {
		t.Errorf("%s: canonical form decodes to another event (digest %s/%s, key %q/%q)", name, d2.Digest, d.Digest, d2.Key, d.Key)
	}
}
