package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeStd is what AppendNDJSON replaces: a json.Encoder without HTML
// escaping.
func encodeStd(t testing.TB, r AppendResult) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAppendNDJSONSameBytes: the hand-written answer line is byte for byte
// what the json.Encoder wrote, for successes, duplicates, refusals and ids
// that need escaping.
func TestAppendNDJSONSameBytes(t *testing.T) {
	for _, r := range []AppendResult{
		{},
		{Line: 1, ID: "env-req-1", Seq: 1},
		{Line: 12, ID: "a<b>&c", Seq: 99, Duplicate: true},
		{ID: "no-line", Seq: 7},
		{Line: 3, ID: `quote"d`, Seq: 2},
		{Line: 4, ID: `back\slash`, Seq: 2},
		{Line: 5, ID: "tab\there", Seq: 2},
		{Line: 6, ID: "é-unicode", Seq: 2},
		{Line: 7, ID: "del\x7f", Seq: 2},
		{Line: 8, ID: "sep\u2028", Seq: 2},
		{Line: 2, Error: &Error{Code: "missing_field", Message: "id is required", Field: "id"}},
		{Line: 2, LastLine: 9, Error: &Error{Code: "missing_field", Message: "id is required", Field: "id"}},
		{Line: 2, LastLine: 3, ID: "odd", Seq: 1},
	} {
		want := encodeStd(t, r)
		if got := r.AppendNDJSON([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%+v: got %q, want %q", r, got, want)
		}
	}
}

func FuzzAppendNDJSON(f *testing.F) {
	f.Add(1, 0, "env-1", uint64(1), false)
	f.Add(0, 0, "", uint64(0), true)
	f.Add(-3, 4, "x\"\\\u2028\xff", uint64(1<<63), true)
	f.Fuzz(func(t *testing.T, line, last int, id string, seq uint64, dup bool) {
		r := AppendResult{Line: line, LastLine: last, ID: id, Seq: seq, Duplicate: dup}
		if got, want := r.AppendNDJSON(nil), encodeStd(t, r); !bytes.Equal(got, want) {
			t.Fatalf("%+v: got %q, want %q", r, got, want)
		}
	})
}

// BenchmarkAnswerLine: one NDJSON answer line, by hand and by the
// json.Encoder it replaced.
func BenchmarkAnswerLine(b *testing.B) {
	r := AppendResult{Line: 12345, ID: "env-req-12345", Seq: 987654}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var line []byte
		for b.Loop() {
			line = r.AppendNDJSON(line[:0])
		}
	})
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(r)
		}
	})
}
