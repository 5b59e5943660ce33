package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// ChildFlag is the flag that turns `ledger bench` into a memory child.
const ChildFlag = "internal-fold"

// ChildResult is what a memory child prints: one JSON line.
type ChildResult struct {
	Asked     int     `json:"asked"`      // events asked for
	Events    int     `json:"events"`     // events folded
	Seconds   float64 `json:"seconds"`    // folding time
	VmHWMKiB  int64   `json:"vmhwm_kib"`  // peak resident set
	VmRSSKiB  int64   `json:"vmrss_kib"`  // resident set at the end
	BudgetHit bool    `json:"budget_hit"` // stopped by the time budget
	// Where the memory is at the end of the fold (not at its peak): the
	// Go heap in use and the runtime's total, Pebble's block cache
	// (including the memtables it is charged with), its file cache, and
	// the sstables of the store.
	GoHeapInuseKiB int64 `json:"go_heap_inuse_kib"`
	GoSysKiB       int64 `json:"go_sys_kib"`
	BlockCacheKiB  int64 `json:"block_cache_kib"`
	FileCacheKiB   int64 `json:"file_cache_kib"`
	Tables         int64 `json:"tables"`
}

// childArgs are the arguments a memory child gets after ChildCommand.
func childArgs(n int, budget time.Duration, padTo int) []string {
	return []string{
		"--" + ChildFlag + "=" + strconv.Itoa(n),
		"--internal-budget=" + budget.String(),
		"--internal-pad=" + strconv.Itoa(padTo),
	}
}

// ChildFlags registers the memory child's flags on fs; when *n > 0 after
// parsing, the process is a child and must call RunFoldChild.
func ChildFlags(fs *flag.FlagSet) (n *int, budget *time.Duration, padTo *int) {
	n = fs.Int(ChildFlag, 0, "internal: fold `N` events into a fresh store and print peak RSS as JSON (the memory figure's child)")
	budget = fs.Duration("internal-budget", FullMemBudget, "internal: the child's time budget")
	padTo = fs.Int("internal-pad", DefaultPadTo, "internal: the child's envelope size")
	return n, budget, padTo
}

// ChildMain runs a child from its arguments: a memory child (childArgs)
// or the bridge figure's gateway child (GatewayFlag); for test binaries,
// which cannot run `ledger bench`, and for `ledger bench` (IsChild).
func ChildMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench-child", flag.ContinueOnError)
	n, budget, padTo := ChildFlags(fs)
	gw := fs.Int(GatewayFlag, 0, "internal: serve the bridge figure's frames of `N` events from a stand-in gateway")
	history := fs.String(GatewayHistoryFlag, "", "internal: the stand-in gateway writes its envelope history to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *gw > 0 {
		return runGatewayChild(ctx, os.Stdin, stdout, *gw, *padTo, *history)
	}
	return RunFoldChild(ctx, stdout, *n, *budget, *padTo, "")
}

// RunFoldChild folds n events of the benchmark mix (generated on the fly,
// bounded memory) directly into a fresh store in a temporary directory
// under tmp ("" is os.TempDir()), committing every
// projections.DefaultBatchSize events like the projector, stops early when
// budget is spent, removes the store, and prints a ChildResult with this
// process's VmHWM and VmRSS (from /proc/self/status).
func RunFoldChild(ctx context.Context, w io.Writer, n int, budget time.Duration, padTo int, tmp string) error {
	if n < 1 || budget <= 0 {
		return fmt.Errorf("%w: child: n %d and budget %v must be positive", ErrOptions, n, budget)
	}
	dir, err := os.MkdirTemp(tmp, "ledger-bench-mem-*")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	deadline := start.Add(budget)
	folded := 0
	last, err := foldDirect(ctx, store, newStreamGen(padTo, genChunk), projector.DefaultBatchSize,
		func() bool {
			if folded%1000 == 0 && time.Now().After(deadline) {
				return true
			}
			return folded >= n
		},
		func(*ledger.Decoded) { folded++ })
	took := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res := ChildResult{GoHeapInuseKiB: int64(ms.HeapInuse >> 10), GoSysKiB: int64(ms.Sys >> 10)}
	if m, merr := store.Metrics(); merr == nil {
		res.BlockCacheKiB, res.FileCacheKiB, res.Tables = m.BlockCache.Size>>10, m.FileCache.Size>>10, m.Total().TablesCount
	}
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	res.Asked, res.Events, res.Seconds, res.BudgetHit = n, int(last), took.Seconds(), int(last) < n
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("bench: child: %w (the memory figure needs Linux's /proc)", err)
	}
	res.VmHWMKiB, _ = parseProcField(status, "VmHWM")
	res.VmRSSKiB, _ = parseProcField(status, "VmRSS")
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// runChild runs one memory child and returns its result.
func runChild(ctx context.Context, o *Options, n int, budget time.Duration) (ChildResult, error) {
	args := append(append([]string{}, o.ChildCommand[1:]...), childArgs(n, budget, o.PadTo)...)
	cmd := exec.CommandContext(ctx, o.ChildCommand[0], args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+o.TempDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return ChildResult{}, fmt.Errorf("bench: memory child (%d events): %w: %s", n, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			last = append(last[:0], l...)
		}
	}
	var res ChildResult
	if err := json.Unmarshal(last, &res); err != nil {
		return ChildResult{}, fmt.Errorf("bench: memory child (%d events): no result line in %q: %w", n, out, err)
	}
	if res.VmHWMKiB <= 0 {
		return ChildResult{}, errors.New("bench: memory child reported no VmHWM")
	}
	return res, nil
}
