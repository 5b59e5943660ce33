package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// Figure names, for Options.Only.
const (
	FigAppend     = "append"
	FigAppendSync = "append_sync"
	FigFold       = "fold"
	FigLag        = "lag"
	FigReads      = "reads"
	FigMemory     = "memory"
	FigIngest     = "ingest"
	FigAgents     = "agents"
)

// Figures lists the figures in the order they run and print.
var Figures = []string{FigAppend, FigAppendSync, FigFold, FigLag, FigReads, FigMemory, FigIngest, FigAgents, FigIngestR3, FigBridge, FigWrites, FigProofs}

// Sizes of the full mode (the README's table) and of --quick (a CI smoke
// run well under a minute).
const (
	DefaultReps          = 3
	DefaultPadTo         = 600
	FullProposals        = 100_000
	QuickProposals       = 3_000
	FullSyncProposals    = 20_000
	QuickSyncProposals   = 600
	FullEvents           = 200_000
	QuickEvents          = 5_000
	FullReadProposals    = 1_000_000
	QuickReadProposals   = 10_000
	FullDuration         = 30 * time.Second
	QuickDuration        = 3 * time.Second
	FullMemBudget        = 10 * time.Minute
	QuickMemBudget       = 20 * time.Second
	FullGets, QuickGets  = 20_000, 1_000
	FullLists, QuickList = 2_000, 200
	// LagLoad is the share of the measured maximum append rate the live
	// lag figure appends at.
	LagLoad = 0.8
)

// Full and quick event counts of the memory figure.
var (
	FullMemEvents = []int{1_000_000, 10_000_000}
	// Quick sizes are past the point (~60k events) where both memtables
	// have filled once: below it, RSS measures the store warming up.
	QuickMemEvents = []int{100_000, 200_000}
)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("bench: invalid options")

// Options configures a run. The zero value is the full mode; Validate fills
// every zero field with its full or quick default.
type Options struct {
	// Quick selects the small sizes (for CI smoke runs).
	Quick bool
	// Reps is the number of repetitions of every figure (≥ 3). Default 3.
	Reps int
	// Proposals is the number of distinct proposals of the append figure's
	// event mix (workload.BenchMix: 60% of the events are proposals).
	// Default 100,000 (quick 3,000).
	Proposals int
	// SyncProposals is the same for append_sync, where every write is
	// fsynced. Default 20,000 (quick 600).
	SyncProposals int
	// IngestEvents is the number of events of the ingest figure (HTTP
	// NDJSON, sync always). Default 100,000 (quick 3,000).
	IngestEvents int
	// IngestBatch and IngestInFlight shape the ingest baselines: raw
	// atomic batches of IngestBatch envelopes (≤ 1000, the server's
	// limit), IngestInFlight of them awaiting their commit acks at once.
	// Default appendlog.DefaultMaxBatch and
	// appendlog.DefaultBatchesInFlight, the committer's own.
	IngestBatch, IngestInFlight int
	// AgentEvents is the number of events the agents figure's 32 clients
	// append one at a time (sync always). Default 20,000 (quick 1,000).
	AgentEvents int
	// BridgeEvents is the number of workload events whose proposals the
	// bridge figure replays (about 60% of them). Default 100,000 (quick
	// 5,000).
	BridgeEvents int
	// WritesEvents is the number of events each run of the writes figure
	// appends (projector folding along, then stopped). Default 2,000,000
	// (quick 3,000).
	WritesEvents int
	// Events is the number of events the fold figure rebuilds from.
	// Default 200,000 (quick 5,000).
	Events int
	// FoldWAL makes the fold figure rebuild with Pebble's WAL, every
	// commit synced, as the live projector commits; by default it
	// rebuilds without one, as `ledger rebuild` does
	// (projections.StoreOptions.NoWAL).
	FoldWAL bool
	// ReadProposals is the number of proposals in the store of the reads
	// figure. Default 1,000,000 (quick 10,000).
	ReadProposals int
	// ProofEvents is the number of events in the tree of the proofs
	// figure's inclusion-proof latency. Default 1,000,000 (quick 20,000).
	ProofEvents int
	// Gets and Lists are the requests per repetition of the reads figure
	// (Gets also of the inclusion proofs).
	Gets, Lists int
	// Duration is how long each repetition of the live lag figure appends.
	// Default 30s (quick 3s).
	Duration time.Duration
	// LagRate, when > 0, is the rate (events/s) every configuration of
	// the live lag figure appends at, instead of LagLoad of a measured
	// maximum: the same load on two binaries whose maxima differ. Default
	// 0 (LagLoad of the maximum).
	LagRate float64
	// MemEvents are the event counts of the memory figure, ascending.
	// Default 1M and 10M (quick 100k, 200k). The smallest runs Reps times
	// and the others once (in full mode each may take the whole budget).
	MemEvents []int
	// MemBudget bounds each memory child: it stops folding when the
	// budget is spent and reports the N it reached. Default 10m (quick 20s).
	MemBudget time.Duration
	// Window is the in-flight window of both append paths. Default
	// appendlog.DefaultMaxInFlight.
	Window int
	// PadTo is the envelope size the workload pads to. Default 600.
	PadTo int
	// Only restricts the run to these figures (see Figures); empty runs
	// all. A ratio of a figure not run prints as n/a.
	Only []string
	// TempDir is where the temporary directories go. Default os.TempDir().
	TempDir string
	// ChildCommand is the command line that runs a child (a memory child,
	// the bridge figure's gateway); for a memory child the event
	// count and the budget are appended as two more arguments (see
	// RunFoldChild). Required when the memory figure runs.
	ChildCommand []string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Logger receives the components' logs (warnings and errors); the
	// zero Logger discards them.
	Logger zerolog.Logger
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	pick := func(p *int, full, quick int) {
		if *p == 0 {
			*p = full
			if o.Quick {
				*p = quick
			}
		}
	}
	if o.Reps == 0 {
		o.Reps = DefaultReps
	}
	pick(&o.Proposals, FullProposals, QuickProposals)
	pick(&o.SyncProposals, FullSyncProposals, QuickSyncProposals)
	pick(&o.IngestEvents, 100_000, 3_000)
	pick(&o.AgentEvents, 20_000, 1_000)
	pick(&o.IngestBatch, appendlog.DefaultMaxBatch, appendlog.DefaultMaxBatch)
	pick(&o.IngestInFlight, appendlog.DefaultBatchesInFlight, appendlog.DefaultBatchesInFlight)
	pick(&o.BridgeEvents, 100_000, 5_000)
	pick(&o.WritesEvents, FullWritesEvents, QuickWritesEvents)
	pick(&o.Events, FullEvents, QuickEvents)
	pick(&o.ReadProposals, FullReadProposals, QuickReadProposals)
	pick(&o.ProofEvents, FullProofEvents, QuickProofEvents)
	pick(&o.Gets, FullGets, QuickGets)
	pick(&o.Lists, FullLists, QuickList)
	pick(&o.Window, appendlog.DefaultMaxInFlight, appendlog.DefaultMaxInFlight)
	pick(&o.PadTo, DefaultPadTo, DefaultPadTo)
	if o.Duration == 0 {
		o.Duration = FullDuration
		if o.Quick {
			o.Duration = QuickDuration
		}
	}
	if o.MemBudget == 0 {
		o.MemBudget = FullMemBudget
		if o.Quick {
			o.MemBudget = QuickMemBudget
		}
	}
	if len(o.MemEvents) == 0 {
		o.MemEvents = slices.Clone(FullMemEvents)
		if o.Quick {
			o.MemEvents = slices.Clone(QuickMemEvents)
		}
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	switch {
	case o.Reps < 3:
		return fmt.Errorf("%w: reps %d, want ≥ 3 (a spread needs three)", ErrOptions, o.Reps)
	case o.Proposals < 1 || o.SyncProposals < 1 || o.ReadProposals < 1 || o.IngestEvents < 1 || o.AgentEvents < Agents:
		return fmt.Errorf("%w: proposal counts must be ≥ 1", ErrOptions)
	case o.Events < 1 || o.Gets < 1 || o.Lists < 1 || o.BridgeEvents < 1 || o.WritesEvents < 1 || o.ProofEvents < 1:
		return fmt.Errorf("%w: event and request counts must be ≥ 1", ErrOptions)
	case o.LagRate < 0:
		return fmt.Errorf("%w: lag rate %v, want ≥ 0", ErrOptions, o.LagRate)
	case o.Duration < 100*time.Millisecond:
		return fmt.Errorf("%w: duration %v, want ≥ 100ms", ErrOptions, o.Duration)
	case o.MemBudget <= 0:
		return fmt.Errorf("%w: memory budget %v, want > 0", ErrOptions, o.MemBudget)
	case o.IngestBatch < 1 || o.IngestBatch > 1000 || o.IngestInFlight < 1 || o.IngestInFlight > 50:
		return fmt.Errorf("%w: ingest batch %d (want 1..1000) or in flight %d (want 1..50)", ErrOptions, o.IngestBatch, o.IngestInFlight)
	case o.Window < 1:
		return fmt.Errorf("%w: window %d, want ≥ 1", ErrOptions, o.Window)
	case o.PadTo < 0 || o.PadTo > ledger.MaxEnvelopeBytes/2:
		return fmt.Errorf("%w: pad-to %d out of range", ErrOptions, o.PadTo)
	}
	for i, n := range o.MemEvents {
		if n < 1 || (i > 0 && n <= o.MemEvents[i-1]) {
			return fmt.Errorf("%w: memory event counts %v must be ≥ 1 and ascending", ErrOptions, o.MemEvents)
		}
	}
	for _, f := range o.Only {
		if !slices.Contains(Figures, f) && !slices.Contains(OptInFigures, f) {
			return fmt.Errorf("%w: unknown figure %q (figures: %s; only when named: %s)", ErrOptions, f, strings.Join(Figures, ", "), strings.Join(OptInFigures, ", "))
		}
	}
	if o.runs(FigMemory) && len(o.ChildCommand) == 0 {
		return fmt.Errorf("%w: the memory figure needs ChildCommand", ErrOptions)
	}
	if o.runs(FigBridge) && len(o.ChildCommand) == 0 {
		return fmt.Errorf("%w: the bridge figure needs ChildCommand (its gateway runs in a child)", ErrOptions)
	}
	return nil
}

// runs reports whether figure f is part of the run.
func (o *Options) runs(f string) bool {
	if slices.Contains(OptInFigures, f) {
		return slices.Contains(o.Only, f)
	}
	return len(o.Only) == 0 || slices.Contains(o.Only, f)
}

// mode is "quick" or "full".
func (o *Options) mode() string {
	if o.Quick {
		return "quick"
	}
	return "full"
}
