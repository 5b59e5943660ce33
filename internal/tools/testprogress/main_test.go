package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

const stream = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":0.1}
{"Action":"start","Package":"example.com/b"}
{"Action":"output","Package":"example.com/b","Test":"TestBad","Output":"    b_test.go:9: want 2, got 3\n"}
{"Action":"fail","Package":"example.com/b","Test":"TestBad","Elapsed":0.2}
go: downloading example.com/c v1.0.0
{"Action":"pass","Package":"example.com/a","Elapsed":1.5}
{"Action":"fail","Package":"example.com/b","Elapsed":2.5}
`

// TestReport: a package line as each ends, a failing test's output, the
// go command's own lines passed through, packages still running named.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Now()
	r := newReport(&out, t0)
	lines := strings.Split(strings.TrimSuffix(stream, "\n"), "\n")
	for i, l := range lines {
		r.line([]byte(l), t0)
		if i == 4 {
			r.progress(t0.Add(90 * time.Second))
		}
	}
	got := out.String()
	for _, want := range []string{
		"… 1m30s: 0 packages done; running example.com/a (1m30s, 1 tests passed), example.com/b (1m30s, 0 tests passed)\n",
		"--- FAIL: TestBad (example.com/b)\n    b_test.go:9: want 2, got 3\n",
		"go: downloading example.com/c v1.0.0\n",
		"ok  \texample.com/a\t1.5s\t1 tests\n",
		"FAIL\texample.com/b\t2.5s\t1 of 1 tests failed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestOK") {
		t.Errorf("a passing test's output printed:\n%s", got)
	}
	if !r.failed() {
		t.Error("failed() = false after a failing package")
	}
}

// TestRunStatus: the command's status is kept; a failed test fails the run
// even when the command exits 0; the summary names the failed package.
func TestRunStatus(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"sh", "-c", "exit 3"}, "m", time.Hour, &out); code != 3 {
		t.Fatalf("exit 3 → %d", code)
	}
	out.Reset()
	fail := `{"Action":"fail","Package":"example.com/b","Elapsed":2.5}`
	if code := run([]string{"sh", "-c", "echo '" + fail + "'"}, "m", time.Hour, &out); code != 1 {
		t.Fatalf("a failed package, exit 0 → %d", code)
	}
	if !strings.Contains(out.String(), "== m FAILED: 0 packages ok, 1 failed") || !strings.Contains(out.String(), "   FAIL example.com/b") {
		t.Fatalf("summary:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"sh", "-c", "echo '{\"Action\":\"pass\",\"Package\":\"x\"}'"}, "m", time.Hour, &out); code != 0 ||
		!strings.Contains(out.String(), "== m passed: 1 packages ok, 0 failed") {
		t.Fatalf("passing run → %d:\n%s", code, out.String())
	}
}
