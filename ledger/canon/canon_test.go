package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"scalar number", ` 1.50 `, `1.50`},
		{"number literal kept", `[1,1.0,1e0,1E+0,-0,0.5e-3]`, `[1,1.0,1e0,1E+0,-0,0.5e-3]`},
		{"literals", "[true ,false,\tnull]", `[true,false,null]`},
		{"sorted keys", `{"b":1,"a":2,"c":{"z":0,"y":[3,{"k":1,"j":2}]}}`, `{"a":2,"b":1,"c":{"y":[3,{"j":2,"k":1}],"z":0}}`},
		{"already sorted", `{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{"empty containers", `{ "a" : [ ] , "b" : { } }`, `{"a":[],"b":{}}`},
		{"whitespace", "\n\r\t {\"a\" :\n1 }\n", `{"a":1}`},
		{"escapes normalised", `"\u00e9\u00E9é\/\"\\\b\f\n\r\t\u0001\u001F\u007f"`, "\"ééé/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u007f\""},
		{"html and line separators literal", `"<>&\u2028\u2029"`, "\"<>&\u2028\u2029\""},
		{"nul escaped", `"a\u0000b"`, `"a\u0000b"`},
		{"surrogate pair", `"\ud83d\ude00"`, "\"😀\""},
		{"keys sort by decoded bytes", `{"a#":1,"a\"":2,"\u00e9":3,"z":4}`, `{"a\"":2,"a#":1,"z":4,"é":3}`},
		{"escaped key equal to plain order", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"unicode keys by bytes", `{"😀":1,"\uffff":2,"~":3}`, "{\"~\":3,\"\uffff\":2,\"😀\":1}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			again, err := Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s -> %s (%v)", got, again, err)
			}
		})
	}
}

func TestCanonicalErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	okDeep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Canonical([]byte(okDeep)); err != nil {
		t.Fatalf("depth %d refused: %v", MaxDepth, err)
	}
	tests := []struct {
		name, in string
		kind     error
		path     string
	}{
		{"empty", ``, ErrSyntax, ""},
		{"only space", "  ", ErrSyntax, ""},
		{"trailing", `{} x`, ErrSyntax, ""},
		{"two values", `1 2`, ErrSyntax, ""},
		{"trailing comma object", `{"a":1,}`, ErrSyntax, ""},
		{"trailing comma array", `[1,]`, ErrSyntax, "[1]"},
		{"missing colon", `{"a" 1}`, ErrSyntax, ""},
		{"bare key", `{a:1}`, ErrSyntax, ""},
		{"single quotes", `{'a':1}`, ErrSyntax, ""},
		{"leading zero", `01`, ErrSyntax, ""},
		{"plus sign", `+1`, ErrSyntax, ""},
		{"dot no digit", `1.`, ErrSyntax, ""},
		{"exp no digit", `1e`, ErrSyntax, ""},
		{"NaN", `NaN`, ErrSyntax, ""},
		{"bad literal", `tru`, ErrSyntax, ""},
		{"unterminated string", `"abc`, ErrSyntax, ""},
		{"raw newline in string", "\"a\nb\"", ErrSyntax, ""},
		{"bad escape", `"\x"`, ErrSyntax, ""},
		{"short unicode escape", `"\u12"`, ErrSyntax, ""},
		{"nested syntax error path", `{"payload":{"params":[1,2,}]}}`, ErrSyntax, "payload.params[2]"},
		{"lone high surrogate", `"\ud800"`, ErrEncoding, ""},
		{"lone low surrogate", `"\udc00x"`, ErrEncoding, ""},
		{"high then non-surrogate", `{"k":"\ud800\u0041"}`, ErrEncoding, "k"},
		{"invalid utf8", "\"\xff\"", ErrEncoding, ""},
		{"encoded surrogate utf8", "\"\xed\xa0\x80\"", ErrEncoding, ""},
		{"duplicate top", `{"id":"a","id":"b"}`, ErrDuplicateKey, "id"},
		{"duplicate via escape", `{"id":"a","\u0069d":"b"}`, ErrDuplicateKey, "id"},
		{"duplicate nested", `{"payload":{"x":[{"m":1,"n":2,"m":3}]}}`, ErrDuplicateKey, "payload.x[0].m"},
		{"too deep", deep, ErrTooDeep, strings.Repeat("[0]", MaxDepth)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Canonical([]byte(tc.in))
			if err == nil {
				t.Fatalf("Canonical(%q) = %s, want error", tc.in, out)
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Canonical(%q) error %v, want %v", tc.in, err, tc.kind)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error", err)
			}
			if ce.Path != tc.path {
				t.Fatalf("path %q, want %q (%v)", ce.Path, tc.path, err)
			}
			if !strings.HasPrefix(err.Error(), "canon: ") {
				t.Fatalf("error not package-prefixed: %v", err)
			}
		})
	}
}

func TestAppendKeepsPrefixOnError(t *testing.T) {
	dst := []byte("prefix")
	got, err := Append(dst, []byte(`{"a":`))
	if err == nil || string(got) != "prefix" {
		t.Fatalf("Append = %q, %v", got, err)
	}
	got, err = Append(dst, []byte(`{"b":1,"a":2}`))
	if err != nil || string(got) != `prefix{"a":2,"b":1}` {
		t.Fatalf("Append = %q, %v", got, err)
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, ` { "b" : [1, 2], "a":1 }`, true},
		{`"\u00e9"`, `"é"`, true},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"a":`, `{"a":`, false},
		{`{"a":1,"a":1}`, `{"a":1}`, false},
	}
	for _, tc := range tests {
		if got := Equal([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("Equal(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	got := string(AppendString(nil, []byte("a\"b\\c\x00\x1f\té")))
	want := `"a\"b\\c\u0000\u001f\té"`
	if got != want {
		t.Fatalf("AppendString = %s, want %s", got, want)
	}
}

// FuzzCanonical checks, for any input: no panic; encoding/json agrees on
// validity (except where canon is stricter: duplicate keys, lone
// surrogates, depth); the output is valid JSON meaning the same value, and
// Canonical is idempotent.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x\u00e9"]}`, `"\ud83d\ude00"`, `[1.0e+3,-0]`, `{"a":{"a":{"a":1}}}`, `{"a":1,"a":2}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		stdValid := json.Valid(in)
		if err != nil {
			if errors.Is(err, ErrSyntax) && stdValid {
				t.Fatalf("canon says syntax error, encoding/json says valid: %q: %v", in, err)
			}
			return
		}
		if !stdValid {
			t.Fatalf("canon accepted what encoding/json refuses: %q -> %q", in, out)
		}
		var a, b any
		da := json.NewDecoder(bytes.NewReader(in))
		da.UseNumber()
		db := json.NewDecoder(bytes.NewReader(out))
		db.UseNumber()
		if err := da.Decode(&a); err != nil {
			t.Fatal(err)
		}
		if err := db.Decode(&b); err != nil {
			t.Fatalf("canonical output invalid: %q: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", in, out)
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	in := []byte(`{"protocol":"mew/v0.4","id":"env-req-1","ts":"2026-01-02T03:04:05Z","from":"untrusted-agent",
 "to":["target-agent"],"kind":"mcp/proposal","correlation_id":["x"],"context":"optional",
 "payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/a","content":"hello\nworld"}}}}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(in); err != nil {
			b.Fatal(err)
		}
	}
}
