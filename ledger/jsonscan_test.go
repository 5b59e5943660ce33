package ledger

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger/canon"
)

// checkSplit compares the light scanner with encoding/json on a text canon
// accepts: every object's members and every array's elements, recursively,
// must be what json.Unmarshal gives as map[string]json.RawMessage and
// []json.RawMessage.
func checkSplit(t *testing.T, raw []byte) {
	t.Helper()
	if _, err := canon.Canonical(raw); err != nil {
		return // the scanner is only ever used on canon-accepted text
	}
	v := bytes.TrimSpace(raw)
	switch v[0] {
	case '{':
		var want map[string]json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("canon accepts what encoding/json refuses: %v: %q", err, raw)
		}
		got := splitObject(v)
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", raw, len(got), len(want))
		}
		for _, m := range got {
			if w, ok := want[m.name]; !ok || !bytes.Equal(w, m.val) {
				t.Fatalf("%q: member %q = %q, want %q (present %v)", raw, m.name, m.val, w, ok)
			}
			if f, ok := findMember(v, m.name); !ok || !bytes.Equal(f, m.val) {
				t.Fatalf("%q: findMember(%q) = %q, %v", raw, m.name, f, ok)
			}
			checkSplit(t, m.val)
		}
		if _, ok := findMember(v, "\x00absent"); ok {
			t.Fatalf("%q: findMember found an absent key", raw)
		}
	case '[':
		var want []json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("canon accepts what encoding/json refuses: %v: %q", err, raw)
		}
		got := splitArray(v)
		if len(got) != len(want) {
			t.Fatalf("%q: %d elements, want %d", raw, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: element %d = %q, want %q", raw, i, got[i], want[i])
			}
			checkSplit(t, got[i])
		}
	case '"':
		var want string
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("canon accepts what encoding/json refuses: %v: %q", err, raw)
		}
		if end := scanValue(v, 0); end != len(v) {
			t.Fatalf("%q: string ends at %d, want %d", raw, end, len(v))
		}
		if got := decodeString(v); got != want {
			t.Fatalf("decodeString(%q) = %q, want %q", raw, got, want)
		}
	}
}

var splitSeeds = []string{
	`{}`, `[]`, ` { "a" : 1 , "b" : [ 1 , "x" , { } ] } `, `{"\u0061":"\"\\","b\\":"\\\"","c":"\\\\"}`,
	`{"a":"é\u00e9\ud83d\ude00","b":null,"c":true,"d":-1.5e+3,"e":[[],[{}]]}`,
	`["a\"b",1,null,false,{"x":"}","y":"]"}]`, `"\\\\\\\""`,
}

func TestSplitMatchesEncodingJSON(t *testing.T) {
	for _, s := range splitSeeds {
		checkSplit(t, []byte(s))
	}
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if len(c.Data) <= 64<<10 { // checkSplit re-checks every level: keep it linear-ish
			checkSplit(t, c.Data)
		}
	}
	g := workload.New(workload.Options{Seed: 1, PadTo: 600, Disorder: 10, Duplicates: 5})
	for _, raw := range g.Batch(500) {
		checkSplit(t, raw)
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSplit(t, raw) })
}
