// Package badinput loads the corpus of malformed and hostile inputs in
// testdata/hostile (repo root) that every append path must refuse with a
// specific error, and every fold must survive.
//
// Layout: testdata/hostile/<want>/<name> holds one input per file, byte for
// byte; <want> is the refusal code every submit path (Appender.Prepare,
// HTTP, submit service, CLI) must answer — a ledger.Code* constant or a
// kernel rule id such as V-PROP-004 — or "accepted" for input that is
// hostile but legal (ids with dots, wildcards, 256-byte ids, ...), which
// must be stored untouched and round-trip through its subject. Inputs too
// big to commit are listed in testdata/hostile/generated.txt and built here
// (see Generators).
package badinput

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Accepted is the Want of an input that is hostile but legal.
const Accepted = "accepted"

// Manifest is the name of the list of generated cases in the corpus dir.
const Manifest = "generated.txt"

// Case is one hostile input.
type Case struct {
	// Name is "<want>/<file>" for a file, "generated/<name>" for a
	// generated case.
	Name string
	// Want is the refusal code of the submit paths, or Accepted.
	Want string
	// Data is the input, byte for byte.
	Data []byte
	// Generated is true for a case built from the manifest.
	Generated bool
}

// Refused reports whether the submit paths must refuse c.
func (c Case) Refused() bool { return c.Want != Accepted }

// Generators build the generated cases; n is the size from the manifest.
// Every generator is deterministic.
var Generators = map[string]func(n int) []byte{
	// n-deep arrays as a proposal's payload.params.
	"nest-array": func(n int) []byte {
		return proposal("hostile-gen-nest-array", strings.Repeat("[", n)+strings.Repeat("]", n))
	},
	// n-deep objects {"a":{"a":...}} as payload.params.
	"nest-object": func(n int) []byte {
		return proposal("hostile-gen-nest-object", strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n))
	},
	// n-deep arrays as the whole body.
	"nest-top": func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	},
	// n opening brackets and nothing else.
	"nest-unclosed": func(n int) []byte { return []byte(strings.Repeat("[", n)) },
	// alternating arrays and objects, n deep, as payload.params.
	"nest-mixed": func(n int) []byte {
		var open, close strings.Builder
		for i := range n {
			if i%2 == 0 {
				open.WriteString(`[`)
			} else {
				open.WriteString(`{"k":`)
			}
		}
		open.WriteString("0")
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				close.WriteString("]")
			} else {
				close.WriteString("}")
			}
		}
		return proposal("hostile-gen-nest-mixed", open.String()+close.String())
	},
	// a valid proposal padded (in payload.params.pad) to exactly n bytes.
	"pad-envelope": func(n int) []byte {
		id := "hostile-gen-pad-" + strconv.Itoa(n)
		b := proposal(id, `{"pad":""}`)
		if len(b) > n {
			panic("hostile: pad-envelope size too small")
		}
		return proposal(id, `{"pad":"`+strings.Repeat("x", n-len(b))+`"}`)
	},
	// payload.params is an array of n small integers.
	"array-elements": func(n int) []byte {
		var b strings.Builder
		b.WriteString("[")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.Itoa(i % 10))
		}
		b.WriteString("]")
		return proposal("hostile-gen-array", b.String())
	},
	// payload.params is an object of n distinct keys.
	"object-keys": func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":%d`, i, i%10)
		}
		b.WriteString("}")
		return proposal("hostile-gen-keys", b.String())
	},
	// payload.params is an object repeating one key n times.
	"dup-keys": func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k":0`)
		}
		b.WriteString("}")
		return proposal("hostile-gen-dup-keys", b.String())
	},
	// payload.params is a string of n bytes.
	"long-string": func(n int) []byte {
		return proposal("hostile-gen-long-string", `"`+strings.Repeat("s", n)+`"`)
	},
	// a proposal with n to entries.
	"to-entries": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"hostile-gen-to","from":"hostile-agent","to":` + list(n, "t") +
			`,"kind":"mcp/proposal","payload":{"method":"tools/call"}}`)
	},
	// a withdrawal naming n proposals.
	"corr-entries": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"hostile-gen-corr","from":"hostile-agent","kind":"mcp/withdraw","correlation_id":` + list(n, "p") + `}`)
	},
	// a proposal whose id is n bytes.
	"long-id": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"` + strings.Repeat("i", n) + `","from":"hostile-agent","kind":"mcp/proposal","payload":{"method":"m"}}`)
	},
	// a proposal whose from is n bytes.
	"long-from": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"hostile-gen-long-from","from":"` + strings.Repeat("f", n) + `","kind":"mcp/proposal","payload":{"method":"m"}}`)
	},
	// a proposal with one to entry of n bytes.
	"long-to": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"hostile-gen-long-to","from":"hostile-agent","to":["` + strings.Repeat("t", n) + `"],"kind":"mcp/proposal","payload":{"method":"m"}}`)
	},
	// a withdrawal whose correlation id is n bytes.
	"long-corr": func(n int) []byte {
		return []byte(`{"protocol":"mew/v0.4","id":"hostile-gen-long-corr","from":"hostile-agent","kind":"mcp/withdraw","correlation_id":["` + strings.Repeat("c", n) + `"]}`)
	},
}

func proposal(id, params string) []byte {
	return []byte(`{"protocol":"mew/v0.4","id":"` + id + `","from":"hostile-agent","to":["fs-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":` + params + `}}`)
}

func list(n int, prefix string) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%s%d"`, prefix, i)
	}
	b.WriteString("]")
	return b.String()
}

// Load returns every case of the corpus in dir: the files of its
// subdirectories (sorted by name), then the generated cases of its
// manifest, in manifest order.
func Load(dir string) ([]Case, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	var cases []Case
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("hostile: %w", err)
		}
		for _, f := range files {
			if f.IsDir() {
				return nil, fmt.Errorf("hostile: %s/%s: nested directories are not cases", e.Name(), f.Name())
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name(), f.Name()))
			if err != nil {
				return nil, fmt.Errorf("hostile: %w", err)
			}
			cases = append(cases, Case{Name: e.Name() + "/" + f.Name(), Want: e.Name(), Data: data})
		}
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	gen, err := loadManifest(filepath.Join(dir, Manifest))
	if err != nil {
		return nil, err
	}
	return append(cases, gen...), nil
}

func loadManifest(path string) ([]Case, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	var cases []Case
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("hostile: %s:%d: want 4 fields (want name generator n), got %d", path, ln, len(f))
		}
		gen, ok := Generators[f[2]]
		if !ok {
			return nil, fmt.Errorf("hostile: %s:%d: unknown generator %q", path, ln, f[2])
		}
		n, err := strconv.Atoi(f[3])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("hostile: %s:%d: bad size %q", path, ln, f[3])
		}
		if names[f[1]] {
			return nil, fmt.Errorf("hostile: %s:%d: duplicate name %q", path, ln, f[1])
		}
		names[f[1]] = true
		cases = append(cases, Case{Name: "generated/" + f[1], Want: f[0], Data: gen(n), Generated: true})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostile: %s: %w", path, err)
	}
	return cases, nil
}

// Dir returns the corpus directory of this repository: testdata/hostile
// under the nearest directory above the working directory that holds a
// go.mod (tests run in their package's directory).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("hostile: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "hostile"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("hostile: no go.mod above %s", wd)
		}
	}
}

// LoadDefault is Load(Dir()).
func LoadDefault() ([]Case, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return Load(dir)
}

// Now is the submit-time clock of the corpus's tests: its kernel time
// windows are far in the past (refused) or in 2100 (accepted).
var Now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// MustLoad is LoadDefault for a test: an error fails it at once.
func MustLoad(t testing.TB) []Case {
	t.Helper()
	cases, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	return cases
}
