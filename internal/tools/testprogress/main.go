// Command testprogress runs `go test -json …` and prints what a person
// watching `make test` needs: one line per package as it ends (as plain
// `go test` does), the output of every failing test, a line every minute
// naming the packages still running (a package can run for minutes under
// the race detector on a loaded machine: the run is never silent), and a
// summary. It exits with the command's status, or 1 when a test failed.
//
//	testprogress [-every 1m] [-name module] -- go test -json ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	every := flag.Duration("every", time.Minute, "how often to name the packages still running")
	name := flag.String("name", "", "what the summary line calls this run (a module)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testprogress [-every 1m] [-name module] -- go test -json [flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args(), *name, *every, os.Stdout))
}

// run runs args and reports on out; it returns the exit status.
func run(args []string, name string, every time.Duration, out io.Writer) int {
	cmd := exec.Command(args[0], args[1:]...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	r := newReport(out, time.Now())
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(out, "testprogress: %v\n", err)
		return 1
	}
	waited := make(chan error, 1)
	go func() { err := cmd.Wait(); _ = pw.Close(); waited <- err }()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.progress(time.Now())
			case <-stop:
				return
			}
		}
	}()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		r.line(sc.Bytes(), time.Now())
	}
	close(stop)
	wg.Wait()
	err := <-waited
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		fmt.Fprintf(out, "testprogress: %v\n", err)
		code = 1
	}
	if code == 0 && r.failed() {
		code = 1
	}
	r.summary(name, time.Now(), code)
	return code
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

type pkgState struct {
	start          time.Time
	passed, failed int
	out            map[string][]string // test ("" for the package) → output not yet printed
}

type report struct {
	mu      sync.Mutex
	out     io.Writer
	start   time.Time
	running map[string]*pkgState
	ok, bad []string
	tests   int
}

func newReport(out io.Writer, now time.Time) *report {
	return &report{out: out, start: now, running: map[string]*pkgState{}}
}

func (r *report) pkg(name string, now time.Time) *pkgState {
	p := r.running[name]
	if p == nil {
		p = &pkgState{start: now, out: map[string][]string{}}
		r.running[name] = p
	}
	return p
}

// line handles one line of the command's output.
func (r *report) line(b []byte, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		fmt.Fprintf(r.out, "%s\n", b) // the go command's own words (a download, a vet finding)
		return
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
		return
	case "build-fail":
		return
	}
	p := r.pkg(e.Package, now)
	switch {
	case e.Action == "output":
		p.out[e.Test] = append(p.out[e.Test], e.Output)
	case e.Test != "" && e.Action == "pass", e.Test != "" && e.Action == "skip":
		p.passed++
		r.tests++
		delete(p.out, e.Test)
	case e.Test != "" && e.Action == "fail":
		p.failed++
		r.tests++
		fmt.Fprintf(r.out, "--- FAIL: %s (%s)\n", e.Test, e.Package)
		for _, l := range p.out[e.Test] {
			fmt.Fprint(r.out, l)
		}
		delete(p.out, e.Test)
	case e.Test == "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail"):
		r.end(e, p)
	}
}

// end reports a package that ended.
func (r *report) end(e event, p *pkgState) {
	delete(r.running, e.Package)
	switch e.Action {
	case "skip":
		fmt.Fprintf(r.out, "?   \t%s\t[no test files]\n", e.Package)
	case "pass":
		r.ok = append(r.ok, e.Package)
		fmt.Fprintf(r.out, "ok  \t%s\t%.1fs\t%d tests\n", e.Package, e.Elapsed, p.passed)
	case "fail":
		r.bad = append(r.bad, e.Package)
		for _, l := range p.out[""] { // a panic, a timeout, a build error
			fmt.Fprint(r.out, l)
		}
		fmt.Fprintf(r.out, "FAIL\t%s\t%.1fs\t%d of %d tests failed\n", e.Package, e.Elapsed, p.failed, p.passed+p.failed)
	}
}

// progress names the packages still running.
func (r *report) progress(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.running) == 0 {
		fmt.Fprintf(r.out, "… %s: %d packages done, building or starting the next\n", dur(now.Sub(r.start)), len(r.ok)+len(r.bad))
		return
	}
	names := make([]string, 0, len(r.running))
	for n := range r.running {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		p := r.running[n]
		parts = append(parts, fmt.Sprintf("%s (%s, %d tests passed)", n, dur(now.Sub(p.start)), p.passed))
	}
	fmt.Fprintf(r.out, "… %s: %d packages done; running %s\n", dur(now.Sub(r.start)), len(r.ok)+len(r.bad), strings.Join(parts, ", "))
}

func (r *report) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bad) > 0
}

func (r *report) summary(name string, now time.Time, code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		name = "tests"
	}
	verdict := "passed"
	if code != 0 {
		verdict = "FAILED"
	}
	fmt.Fprintf(r.out, "== %s %s: %d packages ok, %d failed, %d tests, %s\n", name, verdict, len(r.ok), len(r.bad), r.tests, dur(now.Sub(r.start)))
	for _, b := range r.bad {
		fmt.Fprintf(r.out, "   FAIL %s\n", b)
	}
}

func dur(d time.Duration) string { return d.Round(time.Second).String() }
