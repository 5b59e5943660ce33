package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/projections"
)

// The verifiable-log routes (contract §16), mounted when Options.Proofs is set.
// Checkpoints are text/plain signed notes (C2SP tlog-checkpoint), tiles
// application/octet-stream (C2SP tlog-tiles hash tiles, immutable), the
// rest JSON (client/evidence's types).
const (
	RouteCheckpoint    = "GET /v1/checkpoint"
	RouteCheckpointKey = "GET /v1/checkpoint/key"
	RouteCheckpoints   = "GET /v1/checkpoints"
	RouteTile          = "GET /v1/tile/{path...}"
	RouteProposalProof = "GET /v1/proposals/{id}/proof"
	RouteConsistency   = "GET /v1/proof/consistency"
	RouteInclusion     = "GET /v1/proof/inclusion"
)

// Query parameters of the proof routes.
const (
	paramSize = "size"
	paramTo   = "to"
	paramSeq  = "seq"
	// paramUnwitnessed=1 asks GET /v1/checkpoint for the latest signed
	// checkpoint, witnessed or not.
	paramUnwitnessed = "unwitnessed"
)

// Error codes of the proof routes.

// DefaultCheckpointsLimit and MaxCheckpointsLimit bound a page of
// GET /v1/checkpoints.
const (
	DefaultCheckpointsLimit = 100
	MaxCheckpointsLimit     = 1000
)

func (a *API) mountProofs() {
	a.mux.HandleFunc(RouteCheckpoint, a.getCheckpoint)
	a.mux.HandleFunc(RouteCheckpointKey, a.getCheckpointKey)
	a.mux.HandleFunc(RouteCheckpoints, a.listCheckpoints)
	a.mux.HandleFunc(RouteTile, a.getTile)
	a.mux.HandleFunc(RouteProposalProof, a.getProposalProof)
	a.mux.HandleFunc(RouteConsistency, a.getConsistency)
	a.mux.HandleFunc(RouteInclusion, a.getInclusion)
}

// withTree calls f with the projection in place as a proofs.Tree, holding
// it for the call (an online rebuild's swap waits).
func (s *swapReader) withTree(f func(proofs.Tree) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.r.(proofs.Tree)
	if !ok {
		return fmt.Errorf("api: the projection in place has no tree")
	}
	return f(t)
}

func writeText(w http.ResponseWriter, status int, cache string, body []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// int64Param parses a non-negative integer parameter; def when absent.
func int64Param(q url.Values, name string, def int64) (int64, *api.Error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badParam(name, "%s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}

// proofError answers an error of package proofs.
func (a *API) proofError(w http.ResponseWriter, r *http.Request, field string, err error) {
	if a.logDamaged(w, err) {
		return
	}
	switch {
	case errors.Is(err, proofs.ErrNotFound), errors.Is(err, projections.ErrNotFound):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: field, Message: err.Error()})
	case errors.Is(err, proofs.ErrBeyondTree), errors.Is(err, projections.ErrBeyondTree):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeBeyondTree, Field: field, Message: err.Error()})
	case errors.Is(err, proofs.ErrNotCovered):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeNoCheckpoint, Message: err.Error()})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: err.Error()})
	case errors.Is(err, proofs.ErrForked):
		writeError(w, http.StatusConflict, &api.Error{Code: api.CodeLogDamaged, Message: err.Error()})
	default:
		a.internal(w, r, err)
	}
}

// getCheckpoint answers the latest signed checkpoint (text/plain).
func (a *API) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramUnwitnessed); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	unwitnessed := false
	switch q.Get(paramUnwitnessed) {
	case "", "0", "false":
	case "1", "true":
		unwitnessed = true
	default:
		writeError(w, http.StatusBadRequest, badParam(paramUnwitnessed, "unwitnessed must be 1 or 0, not %q", q.Get(paramUnwitnessed)))
		return
	}
	e, ok := a.opts.Proofs.Served(unwitnessed)
	if !ok {
		w.Header().Set("Retry-After", "1")
		msg := "the ledger has signed no checkpoint yet"
		if a.opts.Proofs.Witnessing() && !unwitnessed {
			msg = "no checkpoint holds the witnesses' quorum yet (GET /v1/status shows each witness; ?unwitnessed=1 serves the latest signed)"
		}
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeNoCheckpoint, Message: msg})
		return
	}
	writeText(w, http.StatusOK, "no-cache", e.Note)
}

// getCheckpointKey answers the verifier key (text/plain, one line).
func (a *API) getCheckpointKey(w http.ResponseWriter, r *http.Request) {
	if e := params(r.URL.Query()); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	writeText(w, http.StatusOK, "no-cache", []byte(a.opts.Proofs.VerifierKey()+"\n"))
}

// listCheckpoints answers a page of the checkpoint log.
func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramFrom, paramLimit); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	from, e := int64Param(q, paramFrom, 0)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	limit, e := int64Param(q, paramLimit, DefaultCheckpointsLimit)
	if e == nil && (limit < 1 || limit > MaxCheckpointsLimit) {
		e = badParam(paramLimit, "limit must be 1..%d", MaxCheckpointsLimit)
	}
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	es, more, err := a.opts.Proofs.Log().List(from, int(limit))
	if err != nil {
		a.internal(w, r, err)
		return
	}
	out := evidence.CheckpointList{Checkpoints: make([]evidence.CheckpointInfo, 0, len(es))}
	for _, e := range es {
		out.Checkpoints = append(out.Checkpoints, evidence.CheckpointInfo{Size: e.Checkpoint.Size, RootHash: e.Checkpoint.Hash.String(), Note: string(e.Note)})
	}
	if more && len(es) > 0 {
		next := es[len(es)-1].Checkpoint.Size + 1
		out.NextFrom = &next
	}
	writeJSON(w, http.StatusOK, out)
}

// getTile answers a C2SP tlog-tiles hash tile or entry bundle.
func (a *API) getTile(w http.ResponseWriter, r *http.Request) {
	path := "tile/" + r.PathValue("path")
	if strings.HasPrefix(path, "tile/entries/") {
		a.getEntryBundle(w, r, path)
		return
	}
	if e := params(r.URL.Query()); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	t, err := evidence.ParseTilePath(path)
	if err != nil {
		if m := badTileWidth(path); m != "" {
			writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "path", Message: m})
			return
		}
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "path",
			Message: fmt.Sprintf("%q is neither a hash tile path (tile/<L>/<N>[.p/<W>]) nor an entry bundle path (tile/entries/<N>[.p/<W>])", path)})
		return
	}
	var data []byte
	err = a.reader.withTree(func(tree proofs.Tree) error {
		var err error
		data, err = a.opts.Proofs.Tile(tree, t)
		return err
	})
	if err != nil {
		a.proofError(w, r, "path", err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	// A tile's bytes never change once the tree holds them (a partial
	// tile is named by its width).
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(data)
}

// getProposalProof answers a proposal's evidence bundle.
func (a *API) getProposalProof(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramSpace, paramSize); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	space, e := a.space(q)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	size, e := int64Param(q, paramSize, -1)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	id := r.PathValue("id")
	var b *evidence.Bundle
	err := a.reader.withTree(func(tree proofs.Tree) error {
		var err error
		b, err = a.opts.Proofs.ProposalProof(r.Context(), tree, space, id, size)
		return err
	})
	if err != nil {
		field := "id"
		if size >= 0 {
			field = paramSize
		}
		if errors.Is(err, proofs.ErrNotFound) && size < 0 {
			writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "id", Message: fmt.Sprintf("no events filed under %q in space %q", id, space)})
			return
		}
		a.proofError(w, r, field, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// getConsistency answers a consistency proof between two tree sizes.
func (a *API) getConsistency(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramFrom, paramTo); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	var from, to int64
	var e *api.Error
	for _, p := range []struct {
		name string
		v    *int64
	}{{paramFrom, &from}, {paramTo, &to}} {
		if q.Get(p.name) == "" {
			e = badParam(p.name, "%s is required", p.name)
		} else if *p.v, e = int64Param(q, p.name, 0); e == nil {
			continue
		}
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if from > to {
		writeError(w, http.StatusBadRequest, badParam(paramFrom, "from (%d) must not exceed to (%d)", from, to))
		return
	}
	if a.touches(w, 0, 0) {
		// Only a rewrite (every proof suspect) is met at seq 0.
		return
	}
	var out evidence.ConsistencyProof
	err := a.reader.withTree(func(tree proofs.Tree) error {
		p, err := a.opts.Proofs.Consistency(tree, from, to)
		out = evidence.ConsistencyProof{From: from, To: to, Proof: evidence.FormatHashes(p)}
		return err
	})
	if err != nil {
		a.proofError(w, r, paramTo, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getInclusion answers the inclusion proof of one stream sequence's leaf.
func (a *API) getInclusion(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramSeq, paramSize); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if q.Get(paramSeq) == "" {
		writeError(w, http.StatusBadRequest, badParam(paramSeq, "seq is required"))
		return
	}
	seq, e := int64Param(q, paramSeq, 0)
	if e == nil && seq == 0 {
		e = badParam(paramSeq, "seq must be a stream sequence (1 or more)")
	}
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	size, e := int64Param(q, paramSize, -1)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if last, err := a.opts.StreamSeq(r.Context()); err == nil && uint64(seq) > last {
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: paramSeq,
			Message: fmt.Sprintf("seq %d is beyond the log, which ends at seq %d", seq, last)})
		return
	}
	if a.touches(w, uint64(seq), uint64(seq)) {
		return
	}
	var out evidence.InclusionProof
	err := a.reader.withTree(func(tree proofs.Tree) error {
		var err error
		out, err = a.opts.Proofs.Inclusion(r.Context(), tree, uint64(seq), size)
		return err
	})
	if err != nil {
		field := paramSeq
		if size >= 0 {
			field = paramSize
		}
		a.proofError(w, r, field, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// badTileWidth says what is wrong with a tile path whose width is out of
// 1..255 (a C2SP partial tile's width), "" for any other path.
func badTileWidth(path string) string {
	i := strings.LastIndex(path, ".p/")
	if i < 0 {
		return ""
	}
	w, err := strconv.Atoi(path[i+3:])
	if err != nil || (w >= 1 && w <= 255) {
		return ""
	}
	return fmt.Sprintf("%q: a partial tile's width must be 1..255, not %d (a full tile has no .p/ width)", path, w)
}
