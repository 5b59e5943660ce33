package replay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/subjects"
)

// Headers a republished message carries about its origin.
const (
	HeaderReplaySeq     = "Ledger-Replay-Seq"     // stream sequence in the source ledger
	HeaderReplaySubject = "Ledger-Replay-Subject" // subject in the source ledger
	HeaderReplayTime    = "Ledger-Replay-Time"    // ledger time, RFC 3339 nanos UTC
)

// Republisher publishes messages under another subject prefix
// (subjects.Republish). With core NATS (the default) each publish is
// fire-and-forget and Flush waits until the server has them all; with
// JetStream each publish waits for a stream's acknowledgement (a stream
// must bind the target subjects), so nothing is lost silently.
//
// The original headers are kept except the server-interpreted Nats-* ones
// (an original Nats-Msg-Id would make a target stream drop the log's own
// duplicates), and HeaderReplay* are added. A Republisher is for one
// goroutine.
type Republisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream // nil: core NATS
	prefix string
	n      int
}

// NewRepublisher returns a Republisher publishing on nc under prefix
// (checked with subjects.CheckPrefix). The caller owns nc.
func NewRepublisher(nc *nats.Conn, prefix string, useJetStream bool) (*Republisher, error) {
	if err := subjects.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r := &Republisher{nc: nc, prefix: prefix}
	if useJetStream {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("replay: jetstream: %w", err)
		}
		r.js = js
	}
	return r, nil
}

// Published returns the number of messages published.
func (r *Republisher) Published() int { return r.n }

// Publish republishes m. Use r.Publish as Read's fn through Func.
func (r *Republisher) Publish(ctx context.Context, m *Message) error {
	subj, err := subjects.Republish(r.prefix, m.Subject)
	if err != nil {
		return fmt.Errorf("replay: seq %d: %w", m.Seq, err)
	}
	h := nats.Header{}
	for k, vs := range m.Header {
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			h[k] = append([]string(nil), vs...)
		}
	}
	h.Set(HeaderReplaySeq, strconv.FormatUint(m.Seq, 10))
	h.Set(HeaderReplaySubject, m.Subject)
	h.Set(HeaderReplayTime, m.Record().Time)
	msg := &nats.Msg{Subject: subj, Header: h, Data: m.Data}
	if r.js != nil {
		if _, err := r.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("replay: republish seq %d to %s: %w", m.Seq, subj, err)
		}
	} else if err := r.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("replay: republish seq %d to %s: %w", m.Seq, subj, err)
	}
	r.n++
	return nil
}

// Func returns Publish as an fn for Read.
func (r *Republisher) Func(ctx context.Context) func(*Message) error {
	return func(m *Message) error { return r.Publish(ctx, m) }
}

// Flush waits until the server has received every core-NATS publish.
func (r *Republisher) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if err := r.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("replay: flush after %d messages: %w", r.n, err)
	}
	return nil
}
