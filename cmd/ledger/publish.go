package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/mewledger/ledger/internal/client"
	"github.com/mewledger/ledger/internal/ndjson"
	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/ledger"
)

func init() {
	register(&command{
		name:     "publish",
		synopsis: "publish [--space S] [-f FILE] [--kernel] [--api URL [--token T] | --nats-url URL [--nats-user U ...]]",
		short:    "append envelopes (JSON lines, stdin by default)",
		help: `Appends MEW lifecycle envelopes, one JSON object per line, read from stdin or
-f FILE, through the HTTP API (default) or, with --nats-url, the submit
service on ledger.submit.<space>. Blank lines are skipped.

With --kernel each line is a bare kernel proposal (a Proposal or an older
KernelRequest object, SPEC §12) that the ledger wraps in its kernel/proposal
envelope (id = proposal_id, from = actor); refusals carry the V-PROP rule id.
Without --kernel a line without "protocol" that has a proposal_id or
request_id is taken as a bare kernel proposal too.

Against a ledger started with --auth: --token (LEDGER_TOKEN) for the API, or
--nats-user with --nats-password-file or --nats-nkey for the submit service
(a gateway user of the auth configuration).

Prints one result line per input line on stdout, in order:
  {"line":1,"id":"env-req-1","seq":1,"duplicate":false}
  {"line":2,"error":{"code":"missing_field","message":"...","field":"id"}}
and each refusal on stderr with its line number:
  line 2: missing_field: id is required and must be a non-empty string (field id)
Exit status 1 if any line was refused, 2 if the ledger cannot be reached.`,
		run: runPublish,
	})
}

// publishBatch is the most lines sent in one NDJSON request.
const publishBatch = 500

func runPublish(ctx context.Context, e env, args []string) error {
	var (
		c        clientOpts
		file     string
		natsURL  string
		maxLines int
		kernel   bool
		creds    natsCreds
	)
	f := newFlags(commands["publish"], e)
	addClientFlags(f, &c, false)
	f.str(&file, "file", "FILE", "", "read envelopes from FILE instead of stdin", false)
	f.short("f", "file")
	f.str(&natsURL, "nats-url", "URL", "", "publish through the submit service at these NATS servers instead of the HTTP API", true)
	f.integer(&maxLines, "batch", "N", publishBatch, "lines per HTTP request", false)
	f.boolean(&kernel, "kernel", false, "each line is a bare kernel proposal, wrapped by the ledger", false)
	creds.register(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q (read from stdin or -f FILE)", f.fs.Args())
	}
	if maxLines < 1 {
		return usageError("--batch %d: want ≥ 1", maxLines)
	}
	if natsURL == "" && (creds.user != "" || creds.passwordFile != "" || creds.nkeyFile != "") {
		return usageError("--nats-user, --nats-password-file and --nats-nkey go with --nats-url (the API takes --token)")
	}
	in := e.stdin
	if file != "" && file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return usageError("%v", err)
		}
		defer fh.Close()
		in = fh
	}

	var send func(ctx context.Context, batch []ndjson.Line) ([]wire.AppendResult, error)
	if natsURL != "" {
		opts, err := creds.options()
		if err != nil {
			return err
		}
		sub, err := client.DialSubmitter(ctx, natsURL, opts...)
		if err != nil {
			return unreachable("NATS", natsURL, err)
		}
		defer sub.Close()
		space := c.space
		if space == "" {
			space = ledger.DefaultSpace
		}
		maxLines = 1 // one request per envelope, in order
		send = func(ctx context.Context, batch []ndjson.Line) ([]wire.AppendResult, error) {
			submit := sub.Submit
			if kernel {
				submit = sub.SubmitKernel
			}
			r, err := submit(ctx, space, batch[0].Data)
			if errors.Is(err, client.ErrNoService) {
				return nil, &unreachableError{msg: err.Error()}
			}
			return []wire.AppendResult{r}, err
		}
	} else {
		cl, err := c.client()
		if err != nil {
			return err
		}
		send = func(ctx context.Context, batch []ndjson.Line) ([]wire.AppendResult, error) {
			raws := make([][]byte, len(batch))
			for i, l := range batch {
				raws[i] = l.Data
			}
			publish := cl.PublishLines
			if kernel {
				publish = cl.PublishKernelLines
			}
			res, err := publish(ctx, c.space, raws)
			if err != nil {
				return nil, clientError(c.api, err)
			}
			if len(res) != len(batch) {
				return nil, fmt.Errorf("the ledger at %s answered %d results for %d lines", c.api, len(res), len(batch))
			}
			return res, nil
		}
	}

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	refused := 0
	report := func(no int, r wire.AppendResult) {
		r.Line = no
		_ = enc.Encode(r)
		if r.Error != nil {
			refused++
			_ = out.Flush()
			msg := r.Error.Code + ": " + r.Error.Message
			if r.Error.Field != "" {
				msg += " (field " + r.Error.Field + ")"
			}
			fmt.Fprintf(e.stderr, "line %d: %s\n", no, msg)
		}
	}
	var batch []ndjson.Line
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := send(ctx, batch)
		if err != nil {
			return err
		}
		for i, l := range batch {
			report(l.No, res[i])
		}
		batch = batch[:0]
		return nil
	}
	err := ndjson.Split(in, ledger.MaxEnvelopeBytes, func(l ndjson.Line) error {
		if l.Oversize() {
			// Over the envelope limit: refused here, as the ledger would.
			if err := flush(); err != nil {
				return err
			}
			report(l.No, wire.AppendResult{Error: &wire.Error{Code: ledger.CodeOversize,
				Message: fmt.Sprintf("envelope is %d bytes, over the limit of %d", l.Size, ledger.MaxEnvelopeBytes)}})
			return nil
		}
		batch = append(batch, l)
		if len(batch) >= maxLines {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	if refused > 0 {
		_ = out.Flush()
		fmt.Fprintf(e.stderr, "ledger publish: %d line(s) refused\n", refused)
		return errFailed
	}
	return nil
}
