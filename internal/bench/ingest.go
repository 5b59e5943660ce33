package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// Targets and shape of the group commit figures (issue 14).
const (
	// TargetIngest: HTTP NDJSON ingest against raw atomic batches of the
	// server's best size, several in flight (issue 28; 0.7 against
	// batches of 256 one at a time before).
	TargetIngest = 0.8
	// TargetAgents: 32 HTTP clients one envelope at a time against 32 raw
	// per-message publishers.
	TargetAgents = 3.0
	// Agents is the number of concurrent clients of the agents figure.
	Agents = 32
)

// startApp starts an in-process ledger (as `ledger serve` without --auth:
// no write limit), fsync on every write, and returns it with a stop func.
func startApp(ctx context.Context, o *Options, edits ...func(*app.Options)) (*app.App, func(), error) {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-app-*")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	ao := app.Options{DataDir: dir, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:-1", Logger: o.Logger}
	for _, e := range edits {
		e(&ao)
	}
	a, err := app.New(ctx, ao)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("bench: start ledger: %w", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(context.WithoutCancel(ctx)) }()
	stop := func() {
		_ = a.Close()
		<-runErr
		_ = os.RemoveAll(dir)
	}
	select {
	case <-a.Ready():
		return a, stop, nil
	case err := <-runErr:
		runErr <- err
		stop()
		return nil, nil, fmt.Errorf("bench: ledger ended before serving: %w", err)
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
}

// ingestFigure measures `ledger publish -f`'s path end to end (one
// streamed HTTP NDJSON request, sync always) against raw atomic-batch
// publishing of the same bytes in batches of the committer's size, and
// returns the ledger's median rate.
func (r *Report) ingestFigure(ctx context.Context, o *Options) (float64, error) {
	evs, err := generate(0, o.IngestEvents, o.PadTo)
	if err != nil {
		return 0, err
	}
	progress(o, "ingest: %d events (~%d bytes each), sync_interval always", len(evs), avgSize(evs))
	vals, base, err := paired(ctx, o, FigIngest, o.Reps,
		func(ctx context.Context) (float64, error) { return ingestLedger(ctx, o, evs) },
		func(ctx context.Context) (float64, error) { return ingestRaw(ctx, o, evs) })
	if err != nil {
		return 0, err
	}
	row := Row{
		Figure: fmt.Sprintf("ingest: events/s, HTTP NDJSON POST streamed through the group commit, as `ledger publish -f` (sync_interval always; %d events, ~%d B)",
			len(evs), avgSize(evs)),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: fmt.Sprintf("raw atomic batches of %d, %d in flight", o.IngestBatch, o.IngestInFlight),
		Target:   fmt.Sprintf("ratio ≥ %.1f", TargetIngest),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetIngest)
	r.Rows = append(r.Rows, row)
	r.Ratios[FigIngest] = median(row.Ratios)
	return median(vals), nil
}

func ingestLedger(ctx context.Context, o *Options, evs []event) (float64, error) {
	return ingestLedgerWith(ctx, o, evs)
}

func ingestLedgerWith(ctx context.Context, o *Options, evs []event, edits ...func(*app.Options)) (float64, error) {
	a, stop, err := startApp(ctx, o, edits...)
	if err != nil {
		return 0, err
	}
	defer stop()
	defer commitProgress(o, "ingest", a.Appender())
	return ingestInto(ctx, a, evs)
}

// ingestInto streams evs to a's HTTP API as one NDJSON request (as
// `ledger publish -f`) and returns events per second.
func ingestInto(ctx context.Context, a *app.App, evs []event) (float64, error) {
	cl, err := client.New(a.HTTPURL())
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	var body bytes.Buffer
	for _, e := range evs {
		body.Write(e.raw)
		body.WriteByte('\n')
	}
	runtime.GC()
	n := 0
	start := time.Now()
	err = cl.AppendStream(ctx, &body, func(r api.AppendResult) error {
		n++
		// A duplicate answer names where the envelope is stored: under
		// load the group commit may give up on a batch whose ack was
		// late and send it again, and the log then answers the second
		// send duplicate of the first (stored once). Only a refusal or a
		// missing sequence is a failure of the run.
		if r.Error != nil || r.Seq == 0 {
			return fmt.Errorf("bench: ingest line %d: %+v", r.Line, r)
		}
		return nil
	}, client.WithSpace(space))
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if n != len(evs) {
		return 0, fmt.Errorf("bench: ingest: %d answers for %d lines", n, len(evs))
	}
	return float64(n) / took.Seconds(), nil
}

// ingestRaw publishes evs as raw atomic batches of o.IngestBatch with up
// to o.IngestInFlight awaiting their commit acks (the committer's own
// defaults unless set), each member with its Nats-Msg-Id: the best the
// server does with the same bytes.
func ingestRaw(ctx context.Context, o *Options, evs []event) (float64, error) {
	e, err := startEnv(ctx, o.TempDir, true, o.Logger)
	if err != nil {
		return 0, err
	}
	defer e.close()
	runtime.GC()
	start := time.Now()
	if err := rawBatches(ctx, e.nc, evs, o.IngestBatch, o.IngestInFlight); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if err := checkStored(ctx, e, len(evs)); err != nil {
		return 0, err
	}
	return float64(len(evs)) / took.Seconds(), nil
}

// rawBatches publishes evs as atomic batches of size on one connection,
// in order, with up to inFlight batches awaiting their commit acks at
// once, and checks every ack.
func rawBatches(ctx context.Context, nc *nats.Conn, evs []event, size, inFlight int) error {
	inbox := nc.NewInbox()
	window := make(chan struct{}, inFlight)
	var (
		mu    sync.Mutex
		want  = map[string]int{}
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		id := m.Subject[len(inbox)+1:]
		mu.Lock()
		n, ok := want[id]
		delete(want, id)
		mu.Unlock()
		if !ok {
			return
		}
		var ack struct {
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &ack); err != nil || ack.Error != nil || ack.Count != n {
			fail(fmt.Errorf("bench: raw batch commit: %s (%v)", m.Data, err))
		}
		<-window
	})
	if err != nil {
		return fmt.Errorf("bench: raw batches: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for lo := 0; lo < len(evs); lo += size {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		part := evs[lo:min(lo+size, len(evs))]
		id := nuid.Next()
		mu.Lock()
		want[id] = len(part)
		mu.Unlock()
		for i, ev := range part {
			m := &nats.Msg{Subject: ev.subject, Data: ev.raw, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, ev.msgID)
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
			if i == len(part)-1 {
				m.Header.Set("Nats-Batch-Commit", "1")
				m.Reply = inbox + "." + id
			}
			if err := nc.PublishMsg(m); err != nil {
				return fmt.Errorf("bench: raw batch: %w", err)
			}
		}
	}
	// Every slot of the window free again: every batch is answered.
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for range inFlight {
		select {
		case window <- struct{}{}:
		case <-t.C:
			return fmt.Errorf("bench: raw batches: commit acks missing after a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return first
}

// agentsFigure measures 32 concurrent HTTP clients, each appending one
// envelope at a time and waiting for its answer (sync always), against 32
// raw publishers each publishing one message at a time and waiting for
// its ack.
func (r *Report) agentsFigure(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.AgentEvents, o.PadTo)
	if err != nil {
		return err
	}
	progress(o, "agents: %d events by %d clients, sync_interval always", len(evs), Agents)
	vals, base, err := paired(ctx, o, FigAgents, o.Reps,
		func(ctx context.Context) (float64, error) { return agentsLedger(ctx, o, evs) },
		func(ctx context.Context) (float64, error) { return agentsRaw(ctx, o, evs) })
	if err != nil {
		return err
	}
	row := Row{
		Figure:   fmt.Sprintf("agents: events/s, %d HTTP clients each POSTing one envelope at a time (sync_interval always; %d events)", Agents, len(evs)),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: fmt.Sprintf("%d raw per-message publishers", Agents),
		Target:   fmt.Sprintf("ratio ≥ %.0f", TargetAgents),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetAgents)
	r.Rows = append(r.Rows, row)
	r.Ratios[FigAgents] = median(row.Ratios)
	return nil
}

// byAgent splits evs among the agents so that each agent's events keep
// their order (agent k takes a contiguous share).
func byAgent(evs []event) [][]event {
	out := make([][]event, Agents)
	per := (len(evs) + Agents - 1) / Agents
	for k := range out {
		lo := min(k*per, len(evs))
		out[k] = evs[lo:min(lo+per, len(evs))]
	}
	return out
}

func runAgents(ctx context.Context, evs []event, one func(ctx context.Context, ev event) error) (float64, error) {
	shares := byAgent(evs)
	errs := make([]error, Agents)
	var wg sync.WaitGroup
	runtime.GC()
	start := time.Now()
	for k := range shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, ev := range shares[k] {
				if err := one(ctx, ev); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(len(evs)) / took.Seconds(), nil
}

func agentsLedger(ctx context.Context, o *Options, evs []event) (float64, error) {
	a, stop, err := startApp(ctx, o)
	if err != nil {
		return 0, err
	}
	defer stop()
	cl, err := client.New(a.HTTPURL(), client.WithHTTPClient(agentsHTTP()))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer commitProgress(o, "agents", a.Appender())
	return runAgents(ctx, evs, func(ctx context.Context, ev event) error {
		r, err := cl.Append(ctx, ev.raw, client.WithSpace(space))
		if err != nil {
			return fmt.Errorf("bench: agent append: %w", err)
		}
		if r.Duplicate || r.Seq == 0 {
			return fmt.Errorf("bench: agent append: %+v", r)
		}
		return nil
	})
}

// agentsHTTP is the HTTP client the agents share: one kept-alive
// connection per agent, as 32 separate agents would each hold. (Go's
// default transport keeps only 2 idle connections per host, so 30 of the
// 32 agents would dial a new TCP connection for every append.)
func agentsHTTP() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = Agents
	t.MaxConnsPerHost = Agents
	return &http.Client{Timeout: time.Minute, Transport: t}
}

func agentsRaw(ctx context.Context, o *Options, evs []event) (float64, error) {
	e, err := startEnv(ctx, o.TempDir, true, o.Logger)
	if err != nil {
		return 0, err
	}
	defer e.close()
	rate, err := runAgents(ctx, evs, func(ctx context.Context, ev event) error {
		ack, err := e.js.Publish(ctx, ev.subject, ev.raw, jetstream.WithMsgID(ev.msgID), jetstream.WithExpectStream(subjects.StreamName))
		if err != nil {
			return fmt.Errorf("bench: raw agent publish: %w", err)
		}
		if ack.Duplicate {
			return fmt.Errorf("bench: raw agent publish: duplicate at %d", ack.Sequence)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rate, checkStored(ctx, e, len(evs))
}

// commitProgress reports how the committer of ap grouped what it stored.
func commitProgress(o *Options, name string, ap *appendlog.Appender) {
	s := ap.CommitStats()
	avg := 0.0
	if s.Batches > 0 {
		avg = float64(s.Envelopes) / float64(s.Batches)
	}
	progress(o, "%s ledger: %d atomic batches (%.1f envelopes each), %d envelopes as plain messages, %d fallbacks, atomic from %d envelopes", name, s.Batches, avg, s.Plain, s.Fallbacks, s.MinAtomic)
}
