package canon

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppendStringHTML(t *testing.T) {
	for in, want := range map[string]string{
		"a\"b\\c\x00\x1f\té":   `"a\"b\\c\u0000\u001f\té"`,
		"<a href=x>&amp;":      `"\u003ca href=x\u003e\u0026amp;"`,
		"line\u2028para\u2029": `"line\u2028para\u2029"`,
		"bad \xff\xfe utf-8":   `"bad \ufffd\ufffd utf-8"`,
	} {
		if got := string(AppendStringHTML(nil, in)); got != want {
			t.Errorf("AppendStringHTML(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzAppendString checks the one string escaper against encoding/json:
// AppendStringHTML writes what json.Marshal writes, for any bytes; for
// valid UTF-8, AppendString's output decodes to the input, is its own
// canonical form, and is the same for a string and a []byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\x00\x1f\t\n\r\b\fé", "<>&", "\u2028\u2029", "\xff", "\xe2\x80", "😀 \u007f \u0080"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendStringHTML(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringHTML(%q) = %s, json.Marshal %s", s, got, want)
		}
		if got := AppendStringHTML([]byte("x"), []byte(s)); !bytes.Equal(got[1:], want) {
			t.Fatalf("AppendStringHTML([]byte %q) = %s, json.Marshal %s", s, got[1:], want)
		}
		if !utf8.ValidString(s) {
			return
		}
		c := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(c, &back); err != nil || back != s {
			t.Fatalf("AppendString(%q) = %s decodes to %q (%v)", s, c, back, err)
		}
		if again, err := Canonical(want); err != nil || !bytes.Equal(again, c) {
			t.Fatalf("AppendString(%q) = %s, Canonical of json.Marshal's %s (%v)", s, c, again, err)
		}
		if b := AppendString(nil, []byte(s)); !bytes.Equal(b, c) {
			t.Fatalf("AppendString of a []byte %s, of a string %s", b, c)
		}
	})
}

// TestAppendStringNoHTMLMatchesEncoder compares AppendStringNoHTML with an
// encoding/json Encoder that does not escape HTML.
func TestAppendStringNoHTMLMatchesEncoder(t *testing.T) {
	for _, s := range []string{"", "plain", "<b>&amp;</b>", `\u003c`, `q"uote`, "é😀", "\u2028\u2029", "tab\tnl\n", "\x01\x7f", "bad\xffutf8\xc3", "&&&"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendStringNoHTML(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendStringNoHTML(%q) = %s, want %s", s, got, want)
		}
	}
}
