// Command directpub is a plain NATS client publishing one envelope straight
// onto a ledger subject with JetStream, as any agent can (contract §8, "direct
// NATS publish"): no ledger code, only nats.go.
//
//	go run ./examples/directpub -url nats://127.0.0.1:4222 \
//	    -subject ledger.default.env-req-5.proposal.untrusted-agent \
//	    -msg-id default/env-req-5/<digest> < examples/direct.json
//
// `ledger subject FILE` prints the subject and the Nats-Msg-Id for an
// envelope. The stream acknowledges with the envelope's sequence; the
// ledger validates while folding (an invalid envelope is kept and shown
// as invalid in the history of the key it names).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("url", nats.DefaultURL, "NATS server")
	subject := flag.String("subject", "", "ledger.<space>.<key>.<type>.<sender>")
	msgID := flag.String("msg-id", "", "Nats-Msg-Id header: <space>/<id>/<digest> (optional: without it a retried publish may be stored twice, which the ledger then folds as a duplicate)")
	flag.Parse()
	if err := run(*url, *subject, *msgID); err != nil {
		fmt.Fprintln(os.Stderr, "directpub:", err)
		os.Exit(1)
	}
}

func run(url, subject, msgID string) error {
	if subject == "" {
		return fmt.Errorf("-subject is required")
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := js.Publish(ctx, subject, body, opts...)
	if err != nil {
		return err
	}
	fmt.Printf("stored in %s at seq %d (duplicate: %v)\n", ack.Stream, ack.Sequence, ack.Duplicate)
	return nil
}
