package client

import (
	"encoding/json"
	"testing"

	"github.com/mewledger/ledger/api"
)

// ackLineUnmarshal is what AppendStream reads an answer line with when
// parseAckLine declines it.
func ackLineUnmarshal(b []byte) (api.AppendResult, bool) {
	var w struct {
		Line      int        `json:"line"`
		ID        string     `json:"id"`
		Seq       uint64     `json:"seq"`
		Duplicate bool       `json:"duplicate"`
		Error     *api.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &w); err != nil || w.Error != nil {
		return api.AppendResult{}, false
	}
	return api.AppendResult{Line: w.Line, ID: w.ID, Seq: w.Seq, Duplicate: w.Duplicate}, true
}

func TestParseAckLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want api.AppendResult
		ok   bool
	}{
		{`{"line":1,"id":"env-req-1","seq":7,"duplicate":false}`, api.AppendResult{Line: 1, ID: "env-req-1", Seq: 7}, true},
		{`{"line":12,"id":"a b","seq":18446744073709551615,"duplicate":true}`, api.AppendResult{Line: 12, ID: "a b", Seq: 18446744073709551615, Duplicate: true}, true},
		{`{"line":1,"id":"x","seq":18446744073709551616,"duplicate":false}`, api.AppendResult{}, false}, // over uint64
		{`{"line":01,"id":"x","seq":1,"duplicate":false}`, api.AppendResult{}, false},                   // leading zero
		{`{"line":1,"id":"x\"y","seq":1,"duplicate":false}`, api.AppendResult{}, false},                 // escape
		{`{"line":1,"id":"é","seq":1,"duplicate":false}`, api.AppendResult{}, false},                    // non-ASCII
		{`{"line":1,"id":"x","seq":1,"duplicate":false,"more":1}`, api.AppendResult{}, false},
		{`{"line":1,"id":"x","seq":1,"duplicate":false} `, api.AppendResult{}, false},
		{`{"line":1,"error":{"code":"missing_field","message":"m","field":"id"}}`, api.AppendResult{}, false},
		{`{"line":1,"id":"x","duplicate":false}`, api.AppendResult{}, false}, // no seq
		{`{"line":-1,"id":"x","seq":1,"duplicate":false}`, api.AppendResult{}, false},
		{``, api.AppendResult{}, false},
	} {
		got, ok := parseAckLine([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseAckLine(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseAckLine checks that what parseAckLine reads, json.Unmarshal
// reads the same way.
func FuzzParseAckLine(f *testing.F) {
	f.Add([]byte(`{"line":1,"id":"env-req-1","seq":7,"duplicate":false}`))
	f.Add([]byte(`{"line":3,"id":"p-1","seq":99,"duplicate":true}`))
	f.Add([]byte(`{"line":1,"error":{"code":"oversize","message":"m"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseAckLine(b)
		if !ok {
			return
		}
		want, wok := ackLineUnmarshal(b)
		if !wok || got != want {
			t.Fatalf("parseAckLine(%q) = %+v; json.Unmarshal reads %+v (ok %v)", b, got, want, wok)
		}
	})
}

func BenchmarkParseAckLine(b *testing.B) {
	line := []byte(`{"line":12345,"id":"env-req-12345","seq":12345,"duplicate":false}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseAckLine(line); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ackLineUnmarshal(line); !ok {
				b.Fatal("declined")
			}
		}
	})
}
