package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/mewledger/ledger/api/evidence"
)

func init() {
	register(&command{
		name:     "proof",
		synopsis: "proof [--space S] [--size N] -f FILE ID",
		short:    "save a proposal's evidence bundle: its history with inclusion proofs and a signed checkpoint",
		help: "Fetches GET /v1/proposals/ID/proof: every event of the proposal's history in\n" +
			"its original bytes, each with its Merkle-tree leaf and an inclusion proof\n" +
			"against a signed checkpoint (the latest, or the one of tree size --size N),\n" +
			"and writes it to FILE (-f, or -o as contract §16 names it; - for stdout). Anyone\n" +
			"holding the ledger's verifier key (`ledger checkpoint key`) checks the file\n" +
			"with no server and no data directory:\n" +
			"`ledger verify --bundle FILE --key KEY`. See docs/proofs.md.",
		run: runProof,
	})
}

func runProof(ctx context.Context, e env, args []string) error {
	var (
		c          clientOpts
		out, sizeS string
	)
	f := newFlags(commands["proof"], e)
	addClientFlags(f, &c, false)
	f.str(&out, "file", "FILE", "", "where to write the bundle (- for stdout); -o FILE as contract §16 writes it", false)
	f.short("f", "file")
	f.short("o", "file")
	f.str(&sizeS, "size", "N", "", "prove against the checkpoint of this tree size (default: the latest)", false)
	q := url.Values{}
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("want exactly one proposal ID, got %d arguments", len(pos))
	}
	if out == "" {
		return usageError("-f FILE (or -o FILE) is required (- for stdout)")
	}
	if sizeS != "" {
		if n, err := strconv.ParseUint(sizeS, 10, 63); err != nil {
			return usageError("--size %q: want a tree size (a non-negative integer)", sizeS)
		} else {
			q.Set("size", strconv.FormatUint(n, 10))
		}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if c.space != "" {
		q.Set("space", c.space)
	}
	var raw []byte
	if err := cl.Do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(pos[0])+"/proof", q, nil, "", false, &raw); err != nil {
		return clientError(c.apiURL, err)
	}
	b, err := evidence.ParseBundle(raw)
	if err != nil {
		return fmt.Errorf("the bundle from %s: %w", c.apiURL, err)
	}
	// Never write a bundle that does not verify (contract §16): checked
	// first against the ledger's own verifier key.
	var key []byte
	if err := cl.Do(ctx, http.MethodGet, "/v1/checkpoint/key", nil, nil, "", false, &key); err != nil {
		return clientError(c.apiURL, err)
	}
	if _, err := evidence.VerifyBundle(b, strings.TrimSpace(string(key))); err != nil {
		return fmt.Errorf("the bundle %s served for %q does not verify against its own key, not written: %w", c.apiURL, pos[0], err)
	}
	data, err := b.Marshal()
	if err != nil {
		return err
	}
	if out == "-" {
		_, err = e.stdout.Write(data)
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("%w", err)
	}
	cp, _ := evidence.ParseUnverified([]byte(b.Checkpoint))
	fmt.Fprintf(e.stderr, "wrote %s: %d events of proposal %q (space %q) with inclusion proofs against checkpoint %s@%d (checked against the key the ledger serves; a third party checks it with the key it trusts: `ledger verify --bundle %s --key KEY`)\n",
		out, len(b.Events), b.Proposal, b.Space, cp.Origin, cp.Size, out)
	return nil
}
