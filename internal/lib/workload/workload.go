// Package workload generates deterministic streams of MEW v0.4 lifecycle
// envelopes for tests and benchmarks: a seeded mix of proposals,
// fulfilments, withdrawals, rejections, responses and explanations, with
// out-of-order arrivals, duplicates and foreign withdrawals on request.
// The same seed always yields the same bytes.
package workload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Mix is the share (in percent) of each kind of envelope. The rest, if
// any, are proposals.
type Mix struct {
	Fulfil, Withdraw, Reject, Response, Chat int
}

// BenchMix is the mix of the performance issue: 60% proposals, 15%
// fulfilments, 10% withdrawals, 10% rejections, 5% responses.
var BenchMix = Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5}

// Options configures a Generator.
type Options struct {
	Seed int64
	Mix  Mix
	// PadTo pads each proposal's params so that envelopes are about this
	// many bytes (0: no padding).
	PadTo int
	// Prefix makes ids distinct between generators (e.g. one per publisher).
	Prefix string
	// Disorder is the percent of follow-up events (withdraw, reject,
	// fulfil) that name a proposal emitted later: orphans in the log.
	Disorder int
	// Duplicates is the percent of envelopes re-emitted as exact retries.
	Duplicates int
	// Foreign is the percent of withdrawals sent by someone other than the
	// proposer (unauthorized).
	Foreign int
}

// Generator emits envelopes. Not safe for concurrent use.
type Generator struct {
	o         Options
	r         *rand.Rand
	proposals []string // ids emitted so far
	proposer  map[string]string
	fulfils   []string
	rejects   []string
	seq       int
	deferred  [][]byte // proposals held back so that follow-ups arrive first
	last      []byte
}

// New returns a generator.
func New(o Options) *Generator {
	if o.Mix == (Mix{}) {
		o.Mix = BenchMix
	}
	return &Generator{o: o, r: rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15)), proposer: map[string]string{}}
}

type env struct {
	Protocol      string          `json:"protocol"`
	ID            string          `json:"id"`
	From          string          `json:"from"`
	To            []string        `json:"to,omitempty"`
	Kind          string          `json:"kind"`
	CorrelationID []string        `json:"correlation_id,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

func (g *Generator) marshal(e env) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // cannot happen: plain structs
	}
	return b
}

// Next returns the next envelope.
func (g *Generator) Next() []byte {
	if len(g.deferred) > 0 && g.r.IntN(3) == 0 {
		b := g.deferred[0]
		g.deferred = g.deferred[1:]
		return g.remember(b)
	}
	if g.last != nil && g.o.Duplicates > 0 && g.r.IntN(100) < g.o.Duplicates {
		return g.last
	}
	g.seq++
	n := g.r.IntN(100)
	m := g.o.Mix
	switch {
	case len(g.proposals) > 0 && n < m.Fulfil:
		return g.remember(g.fulfil())
	case len(g.proposals) > 0 && n < m.Fulfil+m.Withdraw:
		return g.remember(g.withdraw())
	case len(g.proposals) > 0 && n < m.Fulfil+m.Withdraw+m.Reject:
		return g.remember(g.reject())
	case len(g.fulfils) > 0 && n < m.Fulfil+m.Withdraw+m.Reject+m.Response:
		return g.remember(g.response())
	case len(g.rejects) > 0 && n < m.Fulfil+m.Withdraw+m.Reject+m.Response+m.Chat:
		return g.remember(g.chat())
	}
	return g.remember(g.proposal())
}

func (g *Generator) remember(b []byte) []byte {
	g.last = b
	return b
}

func (g *Generator) id(kind string) string { return fmt.Sprintf("%s%s-%d", g.o.Prefix, kind, g.seq) }

func (g *Generator) agent() string { return fmt.Sprintf("agent-%d", g.r.IntN(50)) }

// pick returns a proposal id: usually a recent one.
func (g *Generator) pick() string {
	n := len(g.proposals)
	if n > 64 && g.r.IntN(4) != 0 {
		return g.proposals[n-1-g.r.IntN(64)]
	}
	return g.proposals[g.r.IntN(n)]
}

func (g *Generator) params() json.RawMessage {
	p := map[string]any{"name": "write_file", "arguments": map[string]any{"path": fmt.Sprintf("/work/file-%d.txt", g.seq)}}
	if g.o.PadTo > 0 {
		if pad := g.o.PadTo - 330; pad > 0 {
			p["arguments"].(map[string]any)["content"] = strings.Repeat("x", pad)
		}
	}
	b, _ := json.Marshal(p)
	return b
}

func (g *Generator) proposal() []byte {
	id, from := g.id("p"), g.agent()
	payload, _ := json.Marshal(map[string]any{"method": "tools/call", "params": g.params()})
	b := g.marshal(env{Protocol: "mew/v0.4", ID: id, From: from, To: []string{"fs-agent"}, Kind: "mcp/proposal", Payload: payload})
	g.proposals = append(g.proposals, id)
	g.proposer[id] = from
	if g.o.Disorder > 0 && g.r.IntN(100) < g.o.Disorder {
		// Emit a follow-up first; the proposal comes a little later.
		g.deferred = append(g.deferred, b)
		g.seq++
		return g.reject()
	}
	return b
}

func (g *Generator) fulfil() []byte {
	pid := g.pick()
	id := g.id("f")
	payload, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": g.seq, "method": "tools/call", "params": g.params()})
	g.fulfils = append(g.fulfils, id)
	return g.marshal(env{Protocol: "mew/v0.4", ID: id, From: "human", To: []string{"fs-agent"}, Kind: "mcp/request", CorrelationID: []string{pid}, Payload: payload})
}

func (g *Generator) withdraw() []byte {
	pid := g.pick()
	from := g.proposer[pid]
	if g.o.Foreign > 0 && g.r.IntN(100) < g.o.Foreign {
		from = "mallory"
	}
	return g.marshal(env{Protocol: "mew/v0.4", ID: g.id("w"), From: from, Kind: "mcp/withdraw", CorrelationID: []string{pid}, Payload: json.RawMessage(`{"reason":"no_longer_needed"}`)})
}

var reasons = []string{"unsafe", "busy", "policy", "disagree", "custom-reason"}

func (g *Generator) reject() []byte {
	pid := g.pick()
	id := g.id("r")
	g.rejects = append(g.rejects, id)
	payload, _ := json.Marshal(map[string]string{"reason": reasons[g.r.IntN(len(reasons))]})
	return g.marshal(env{Protocol: "mew/v0.4", ID: id, From: "fs-agent", Kind: "mcp/reject", CorrelationID: []string{pid}, Payload: payload})
}

func (g *Generator) response() []byte {
	fid := g.fulfils[g.r.IntN(len(g.fulfils))]
	return g.marshal(env{Protocol: "mew/v0.4", ID: g.id("resp"), From: "fs-agent", Kind: "mcp/response", CorrelationID: []string{fid}, Payload: json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)})
}

func (g *Generator) chat() []byte {
	rid := g.rejects[g.r.IntN(len(g.rejects))]
	return g.marshal(env{Protocol: "mew/v0.4", ID: g.id("chat"), From: "fs-agent", Kind: "chat", CorrelationID: []string{rid}, Payload: json.RawMessage(`{"text":"outside the sandbox"}`)})
}

// Batch returns the next n envelopes.
func (g *Generator) Batch(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

// Proposals returns the ids of the proposals emitted so far.
func (g *Generator) Proposals() []string { return append([]string(nil), g.proposals...) }
