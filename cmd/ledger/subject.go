package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mewledger/ledger/ledger"
)

func init() {
	register(&command{
		name:     "subject",
		synopsis: "subject [--space S] [-o table|json] [FILE]",
		short:    "print the subject and Nats-Msg-Id to publish an envelope on directly",
		help: `Reads one envelope (FILE, or stdin) and prints what a plain NATS client
publishes it with: the subject ledger.<space>.<key>.<type>.<sender> (tokens
encoded as the ledger does) and the Nats-Msg-Id header <space>/<id>/<digest>
that makes a retried publish stored once. The envelope is validated as on
every submit path; a refusal is printed like publish's and exits 1.`,
		run: runSubject,
	})
}

func runSubject(_ context.Context, e env, args []string) error {
	var space, output string
	f := newFlags(commands["subject"], e)
	f.str(&space, "space", "NAME", ledger.DefaultSpace, "space", true)
	f.str(&output, "output", "table|json", outputTable, "table, or json {\"subject\",\"msg_id\"}", true)
	f.short("o", "output")
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageError("want at most one FILE")
	}
	if output != outputTable && output != outputJSON {
		return usageError("--output %q: want table or json", output)
	}
	in := e.stdin
	if len(pos) == 1 && pos[0] != "-" {
		fh, err := os.Open(pos[0])
		if err != nil {
			return usageError("%v", err)
		}
		defer fh.Close()
		in = fh
	}
	raw, err := io.ReadAll(io.LimitReader(in, ledger.MaxEnvelopeBytes+2))
	if err != nil {
		return fmt.Errorf("reading the envelope: %w", err)
	}
	for len(raw) > 0 && (raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r') {
		raw = raw[:len(raw)-1]
	}
	p, err := ledger.PrepareStandalone(space, raw, ledger.DefaultSubmitLimits(), time.Now())
	if r, ok := ledger.AsRefusal(err); ok {
		msg := r.Code + ": " + r.Message
		if r.Field != "" {
			msg += " (field " + r.Field + ")"
		}
		fmt.Fprintln(e.stderr, msg)
		return errFailed
	}
	if err != nil {
		return err
	}
	subject, msgID := p.Subject, p.MsgID
	if output == outputJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]string{"subject": subject, "msg_id": msgID})
	}
	fmt.Fprintf(e.stdout, "subject      %s\nnats-msg-id  %s\n", subject, msgID)
	return nil
}
