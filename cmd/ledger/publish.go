package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/ndjson"
	"github.com/mewledger/ledger/internal/lib/progress"
	"github.com/mewledger/ledger/internal/server/submit"
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
KernelRequest object, contract §12) that the ledger wraps in its kernel/proposal
envelope (id = proposal_id, from = actor); refusals carry the V-PROP rule id.
Without --kernel a line without "protocol" that has a proposal_id or
request_id is taken as a bare kernel proposal too.

Against a ledger started with --auth: --token (LEDGER_TOKEN) for the API, or
--nats-user with --nats-password-file or --nats-nkey for the submit service
(a gateway user of the auth configuration).

Over HTTP, lines go out in streamed NDJSON requests of up to --batch lines
(32 MiB): the ledger appends and answers them while they are still being
sent, so its group commit always has lines to batch and the answers are
printed as they come. A progress bar is drawn on stderr when it is a
terminal.

Prints one result line per input line on stdout, in order:
  {"line":1,"id":"env-req-1","seq":1,"duplicate":false}
  {"line":2,"error":{"code":"missing_field","message":"...","field":"id"}}
and each refusal on stderr with its line number:
  line 2: missing_field: id is required and must be a non-empty string (field id)
Exit status 1 if any line was refused, 2 if the ledger cannot be reached.`,
		run: runPublish,
	})
}

// publishBatch is the most lines, and publishBatchBytes the most bytes,
// sent in one streamed NDJSON request (the ledger's default body limit is
// 64 MiB).
const (
	publishBatch      = 100_000
	publishBatchBytes = 32 << 20
)

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
	var size uint64 // of the input, when known
	if file != "" && file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return usageError("%v", err)
		}
		defer fh.Close()
		in = fh
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
			size = uint64(st.Size())
		}
	}

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	var line []byte // one result line, reused: the encoder's bytes (api.AppendResult.AppendNDJSON)
	refused := 0
	report := func(no int, r api.AppendResult) {
		r.Line = no
		line = r.AppendNDJSON(line[:0])
		_, _ = out.Write(line)
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
	oversize := func(l ndjson.Line) api.AppendResult {
		// Over the envelope limit: refused here, as the ledger would.
		return api.AppendResult{Error: &api.Error{Code: api.CodeOversize,
			Message: fmt.Sprintf("envelope is %d bytes, over the limit of %d", l.Size, ledger.MaxEnvelopeBytes)}}
	}

	var err error
	if natsURL != "" {
		c.announce(natsURL, "nats-url")
		err = publishNATS(ctx, natsURL, c.space, kernel, creds, in, report, oversize)
	} else {
		err = publishHTTP(ctx, c, kernel, in, size, maxLines, e, report, oversize)
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

// publishNATS sends one submit request per line, in order.
func publishNATS(ctx context.Context, natsURL, space string, kernel bool, creds natsCreds, in io.Reader,
	report func(int, api.AppendResult), oversize func(ndjson.Line) api.AppendResult) error {
	opts, err := creds.options()
	if err != nil {
		return err
	}
	sub, err := submit.DialSubmitter(ctx, natsURL, opts...)
	if err != nil {
		return unreachable("NATS", natsURL, err)
	}
	defer sub.Close()
	if space == "" {
		space = ledger.DefaultSpace
	}
	send := sub.Submit
	if kernel {
		send = sub.SubmitKernel
	}
	return ndjson.Split(in, ledger.MaxEnvelopeBytes, func(l ndjson.Line) error {
		if l.Oversize() {
			report(l.No, oversize(l))
			return nil
		}
		r, err := send(ctx, space, l.Data)
		if errors.Is(err, submit.ErrNoService) {
			return &unreachableError{msg: err.Error()}
		}
		if err != nil {
			return err
		}
		report(l.No, r)
		return nil
	})
}

// pubEntry is a line on its way: sent (its answer comes from the ledger)
// or refused here.
type pubEntry struct {
	no    int
	bytes uint64
	local *api.AppendResult
}

// publishHTTP streams the input to the ledger in NDJSON requests of at
// most maxLines lines (publishBatchBytes), one after the other, each
// written by a goroutine while the answers are read and printed: the
// ledger answers line by line, so it is kept busy for the whole request.
// The lines go out in input order and the ledger stores them in that
// order. Blank lines are not sent; oversize lines are refused here and
// reported in their place.
func publishHTTP(ctx context.Context, c clientOpts, kernel bool, in io.Reader, size uint64, maxLines int, e env,
	report func(int, api.AppendResult), oversize func(ndjson.Line) api.AppendResult) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	mode := progress.Off // a bar on a terminal; stdout carries the results
	if progress.IsTerminal(e.stderr) {
		mode = progress.Bar
	}
	unit := "events"
	if size > 0 {
		unit = "bytes"
	}
	bar := progress.New(size, progress.Options{Description: "publish", Unit: unit, Out: e.stderr, Mode: mode})
	var done, answered uint64
	advance := func(en pubEntry) {
		answered++
		if unit == "bytes" {
			done += en.bytes
			bar.Events(answered) // the one rate shown: lines (events) per second
		} else {
			done++
		}
		bar.Update(done, size)
	}

	// The input is read by one goroutine for the whole run; each request
	// takes lines from it until its limits.
	lines := make(chan ndjson.Line, 256)
	readErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(lines)
		readErr <- ndjson.Split(in, ledger.MaxEnvelopeBytes, func(l ndjson.Line) error {
			select {
			case lines <- l:
				return nil
			case <-rctx.Done():
				return rctx.Err()
			}
		})
	}()

	var pending ndjson.Line
	havePending, eof := false, false
	for !eof {
		// The order of what this request carries, as it is written.
		var (
			mu    sync.Mutex
			order []pubEntry
			head  int
		)
		push := func(en pubEntry) { mu.Lock(); order = append(order, en); mu.Unlock() }
		pop := func() (pubEntry, bool) {
			mu.Lock()
			defer mu.Unlock()
			if head == len(order) {
				return pubEntry{}, false
			}
			en := order[head]
			order[head] = pubEntry{}
			head++
			return en, true
		}
		// flushLocal reports the local refusals at the head of the order.
		flushLocal := func() {
			for {
				mu.Lock()
				if head == len(order) || order[head].local == nil {
					mu.Unlock()
					return
				}
				en := order[head]
				head++
				mu.Unlock()
				report(en.no, *en.local)
				advance(en)
			}
		}
		pr, pw := io.Pipe()
		sentLines := 0
		written := make(chan struct{})
		go func() {
			defer close(written)
			var n, nbytes int
			bw := bufio.NewWriterSize(pw, 64<<10)
			for n < maxLines && nbytes < publishBatchBytes {
				l, ok := pending, havePending
				havePending = false
				if !ok {
					l, ok = <-lines
				}
				if !ok {
					eof = true
					break
				}
				en := pubEntry{no: l.No, bytes: uint64(l.Size) + 1}
				if l.Oversize() {
					r := oversize(l)
					en.local = &r
					push(en)
					continue
				}
				if n > 0 && nbytes+len(l.Data) > publishBatchBytes {
					pending, havePending = l, true // the next request's first
					break
				}
				push(en)
				if _, err := bw.Write(l.Data); err != nil {
					pw.CloseWithError(err)
					return
				}
				_ = bw.WriteByte('\n')
				n++
				nbytes += len(l.Data) + 1
			}
			sentLines = n
			pw.CloseWithError(bw.Flush())
		}()
		got := 0
		err := cl.AppendStream(ctx, pr, func(res api.AppendResult) error {
			r := res
			flushLocal()
			en, ok := pop()
			if !ok || en.local != nil {
				return fmt.Errorf("the ledger at %s answered more lines than were sent", c.apiURL)
			}
			got++
			report(en.no, r)
			advance(en)
			return nil
		}, client.AppendOptions{Space: c.space, Kernel: kernel})
		_ = pr.Close() // unblocks the writer if the request ended early
		if err != nil {
			bar.Finish(err)
			return clientError(c.apiURL, err)
		}
		<-written
		flushLocal()
		if got != sentLines {
			err := fmt.Errorf("the ledger at %s answered %d of %d lines", c.apiURL, got, sentLines)
			bar.Finish(err)
			return err
		}
	}
	err = <-readErr
	bar.Finish(err)
	return err
}
