package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/internal/bench"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/ledger/appendlog"
)

func init() {
	register(&command{
		name:     "bench",
		synopsis: "bench [--quick] [--reps 3] [--events N] [--proposals N] [--duration D] [--out FILE]",
		short:    "measure the ledger against raw JetStream and a naive projector, in one run",
		help: `Measures, in this process tree on this machine, against embedded NATS
servers and Pebble stores in temporary directories (removed afterwards):
append and append_sync (the ledger's append path vs raw PublishAsync of the
same bytes), fold (rebuild vs a naive read-modify-write consumer), live lag
with the whole ledger running at 80% of the measured append maximum and at
80% of the measured ingest maximum (through the group commit), HTTP
read latencies over a store of --read-proposals proposals, and peak RSS of
folding 1,000,000 and up to 10,000,000 events (10 minutes at most) in child processes,
and the group commit: ingest (ledger publish -f's streamed HTTP NDJSON path
vs raw atomic batches of the same bytes), ingest_r3 (the same on an
in-process three-node cluster) and agents (32 HTTP clients appending one
envelope at a time vs 32 raw per-message publishers), bridge (the
stand-in MEW gateway, in a child process, replaying proposals through a
WebSocket to a bridge inside the server: lifecycle envelopes stored per
second, target 10,000, against raw atomic batches of the same bytes, and
the receive-to-stored p99), and writes (--writes-events, default
2,000,000, appended at full speed with the default duplicate window, once
with the projector folding along and once with it stopped: the rate, and
every append accepted, none stored twice), all fsync always;
and proofs (contract §16): the fold with the Merkle tree vs the same fold
without it, GET /v1/proof/inclusion latency over a tree of --proof-events
events, and checkpoints signed and verified per second.
Every figure is the median of --reps repetitions with its spread. Prints a
markdown table; the last line is
"ratios: append=X append_sync=Y fold=Z ingest=I agents=A". Progress goes to
stderr. --quick runs small sizes in well under a minute (CI smoke test).`,
		run: runBench,
	})
}

func runBench(ctx context.Context, e env, args []string) error {
	// A child (internal: a memory child, the bridge figure's gateway): not
	// a user-facing flag, so not in --help.
	if bench.IsChild(args) {
		return bench.ChildMain(ctx, args, e.stdout)
	}
	var (
		o                            bench.Options
		out, only, memEvents, cpuOut string
	)
	f := newFlags(commands["bench"], e)
	f.boolean(&o.Quick, "quick", false, "small sizes and short runs (CI smoke test)", false)
	f.integer(&o.Reps, "reps", "N", bench.DefaultReps, "repetitions of every figure (≥ 3)", false)
	f.integer(&o.Events, "events", "N", 0, fmt.Sprintf("events the fold figure rebuilds from (default %d, quick %d)", bench.FullEvents, bench.QuickEvents), false)
	f.boolean(&o.FoldWAL, "fold-wal", false, "fold figure: rebuild with Pebble's WAL, every commit synced, as the live projector commits (default: without, as `ledger rebuild`)", false)
	f.integer(&o.Proposals, "proposals", "N", 0, fmt.Sprintf("distinct proposals of the append figure (default %d, quick %d)", bench.FullProposals, bench.QuickProposals), false)
	f.integer(&o.SyncProposals, "sync-proposals", "N", 0, fmt.Sprintf("distinct proposals of the append_sync figure (default %d, quick %d)", bench.FullSyncProposals, bench.QuickSyncProposals), false)
	f.integer(&o.ReadProposals, "read-proposals", "N", 0, fmt.Sprintf("proposals in the reads figure's store (default %d, quick %d)", bench.FullReadProposals, bench.QuickReadProposals), false)
	f.integer(&o.IngestEvents, "ingest-events", "N", 0, "events of the ingest figures (default 100000, quick 3000)", false)
	f.integer(&o.AgentEvents, "agent-events", "N", 0, "events of the agents figure (default 20000, quick 1000)", false)
	f.integer(&o.WritesEvents, "writes-events", "N", 0, fmt.Sprintf("events of each run of the writes figure, projector folding and stopped (default %d, quick %d)", bench.FullWritesEvents, bench.QuickWritesEvents), false)
	f.integer(&o.IngestBatch, "ingest-batch", "N", 0, fmt.Sprintf("envelopes per raw atomic batch of the ingest baselines, ≤ 1000 (default %d, the committer's)", appendlog.DefaultMaxBatch), false)
	f.integer(&o.IngestInFlight, "ingest-inflight", "N", 0, fmt.Sprintf("raw atomic batches in flight of the ingest baselines (default %d, the committer's)", appendlog.DefaultBatchesInFlight), false)
	f.integer(&o.ProofEvents, "proof-events", "N", 0, fmt.Sprintf("events in the proofs figure's tree (default %d, quick %d)", bench.FullProofEvents, bench.QuickProofEvents), false)
	f.duration(&o.Duration, "duration", "D", 0, fmt.Sprintf("appending time of each live lag repetition (default %v, quick %v)", bench.FullDuration, bench.QuickDuration))
	f.float(&o.LagRate, "lag-rate", "N", 0, "events/s every live lag configuration appends at, instead of 80% of its measured maximum (default: 80% of the maximum)", false)
	f.str(&memEvents, "mem-events", "N,N[,N]", "", "event counts of the memory figure (default 1000000,10000000; quick 100000,200000)", false)
	f.duration(&o.MemBudget, "mem-budget", "D", 0, fmt.Sprintf("time budget of each memory child (default %v)", bench.FullMemBudget))
	f.str(&only, "only", "FIGURE[,FIGURE]", "", "run only these figures: "+strings.Join(bench.Figures, ", ")+"; and, only when named, "+strings.Join(bench.OptInFigures, ", ")+" (builds and runs two litewitness: see docs/performance.md)", false)
	f.str(&out, "out", "FILE", "", "also write the table to FILE", false)
	f.str(&cpuOut, "cpuprofile", "FILE", "", "write a CPU profile of the whole run to FILE", false)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
	}
	for _, s := range strings.Split(memEvents, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		if err != nil {
			return usageError("--mem-events %q: %v", memEvents, err)
		}
		o.MemEvents = append(o.MemEvents, n)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: the memory figure runs this binary again: %w", err)
	}
	o.ChildCommand = []string{exe, "bench"}
	o.Progress = e.stderr
	if o.Logger, err = logging.New(logging.Options{Level: "warn", Out: e.stderr}); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return usageError("%v", err)
	}
	if cpuOut != "" {
		pf, err := os.Create(cpuOut)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	command := strings.TrimSpace("ledger bench " + strings.Join(args, " "))
	if out != "" {
		fo, err := os.Create(out)
		if err != nil {
			return err
		}
		if err := rep.Markdown(fo, command); err != nil {
			_ = fo.Close()
			return err
		}
		if err := fo.Close(); err != nil {
			return err
		}
	}
	return rep.Markdown(e.stdout, command)
}

// durationFlag is a flag.Value for a time.Duration with a zero default
// that prints as empty.
type durationFlag struct{ p *time.Duration }

func (d durationFlag) String() string {
	if d.p == nil || *d.p == 0 {
		return ""
	}
	return d.p.String()
}

func (d durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d.p = v
	return nil
}

// duration registers a duration flag (no environment variable).
func (f *flags) duration(p *time.Duration, name, meta string, def time.Duration, usage string) {
	*p = def
	f.meta[name] = meta
	f.fs.Var(durationFlag{p}, name, usage)
}
