package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "get",
		synopsis: "get [--space S] [-o table|json] [--min-seq N] [--verify --verifier-key KEY [--verify-state FILE]] ID",
		short:    "show one proposal's state",
		help: "Shows the projected state of proposal ID: a table by default, or with -o json\nthe API's proposal object exactly. When the proposal's lifecycle crosses a\n" +
			"recording hole (a window no recorder of its MEW space recorded: docs/bridge.md),\n" +
			"it says so, with each hole's window and recorders in gap (hole_crossing).\n\n" +
			"With --verify, the read is checked against the ledger's signed checkpoints\n" +
			"(docs/proofs.md): every event of the proposal's history is proven to be in\n" +
			"the log the checkpoint signs (its leaf and inclusion proof), the history is\n" +
			"those events, the checkpoint carries a valid signature of --verifier-key (the\n" +
			"key itself or a file holding it: get it from the ledger's operator, out of\n" +
			"band), and it extends the last checkpoint this machine accepted, kept in\n" +
			"--verify-state (default <user config dir>/ledger/checkpoints/<origin>,\n" +
			"e.g. ~/.config/ledger/checkpoints/...). A log that forked, shrank or was\n" +
			"rewritten fails (exit 1) and the kept checkpoint is not replaced. The\n" +
			"proposal's state is the ledger's fold of the proven events: it is shown, not\n" +
			"re-derived. With -o json the proposal is printed as decoded.",
		run: runGet,
	})
}

func runGet(ctx context.Context, e env, args []string) error {
	var (
		co               clientOpts
		verify           bool
		keyArg, stateArg string
	)
	f := newFlags(commands["get"], e)
	addClientFlags(f, &co, true)
	f.boolean(&verify, "verify", false, "check the read against the ledger's signed checkpoints (see below)", true)
	f.str(&keyArg, "verifier-key", "KEY", "", "with --verify: the ledger's verifier key, or a file holding it", true)
	f.str(&stateArg, "verify-state", "FILE", "", "with --verify: the file keeping the last accepted checkpoint (default <user config dir>/ledger/checkpoints/<origin>)", true)
	var wf witnessFlags
	wf.register(f, true)
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("want exactly one proposal ID, got %d arguments", len(pos))
	}
	cl, err := co.client()
	if err != nil {
		return err
	}
	if verify {
		w, err := wf.witnesses()
		if err != nil {
			return err
		}
		return getVerified(ctx, e, &co, keyArg, stateArg, pos[0], w)
	}
	raw, err := cl.GetRaw(ctx, pos[0], co.read())
	if err != nil {
		return clientError(co.apiURL, err)
	}
	if co.output == outputJSON {
		_, err = fmt.Fprint(e.stdout, string(raw))
		return err
	}
	var p api.Proposal
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("the proposal from %s: %w", co.apiURL, err)
	}
	return renderProposal(e.stdout, &p)
}

// getVerified is `ledger get --verify`: a client.VerifiedGet.
func getVerified(ctx context.Context, e env, co *clientOpts, keyArg, state, id string, w evidence.Witnesses) error {
	if keyArg == "" {
		return usageError("--verify needs --verifier-key KEY (LEDGER_VERIFIER_KEY): the key `ledger checkpoint key` prints, or a file holding it")
	}
	key := keyArg
	if _, err := evidence.NewVerifier(key); err != nil {
		b, err := os.ReadFile(keyArg)
		if err != nil {
			return usageError("--verifier-key %q is neither a verifier key (<origin>+<hash>+<base64>) nor a readable file", keyArg)
		}
		key = strings.TrimSpace(string(b))
		if _, err := evidence.NewVerifier(key); err != nil {
			return usageError("--verifier-key %s: %v", keyArg, err)
		}
	}
	if state == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return usageError("--verify-state: no default (%v): name a file", err)
		}
		origin, _, _ := strings.Cut(key, "+")
		state = filepath.Join(dir, "ledger", "checkpoints", url.PathEscape(origin))
	}
	opts := []client.Option{client.WithToken(co.token), client.WithVerifier(key, state)}
	if len(w.Keys) > 0 {
		opts = append(opts, client.WithWitnessVerifiers(w))
	}
	cl, err := client.New(co.apiURL, opts...)
	if err != nil {
		return usageError("%v", err)
	}
	co.announce(cl.API(), "api")
	vp, err := cl.VerifiedGet(ctx, id, co.read())
	if err != nil {
		return clientError(co.apiURL, err)
	}
	// The verdict is the answer asked for: -q silences the which-ledger
	// line, never this.
	fmt.Fprintf(e.stderr, "verified: %d events of %q are in the log checkpoint %s signs, consistent with the last accepted one (kept in %s); the state shown is the ledger's fold of them\n",
		len(vp.Bundle.Events), id, vp.Checkpoint, state)
	if len(vp.Cosigners) > 0 {
		fmt.Fprintf(e.stderr, "cosigned by the witnesses %q\n", vp.Cosigners)
	}
	if co.output == outputJSON {
		enc := json.NewEncoder(e.stdout)
		return enc.Encode(vp.Proposal)
	}
	return renderProposal(e.stdout, vp.Proposal)
}
