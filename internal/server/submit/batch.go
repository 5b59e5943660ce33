package submit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/lib/ndjson"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// Batch requests (one request, many envelopes, one result per line).
const (
	// HeaderContentType set to application/x-ndjson (or another NDJSON
	// media type) makes a request a batch of one envelope per line; set to
	// application/json with a body that is a JSON array, a batch of the
	// array's envelopes. Any other request is one envelope (a top-level
	// array without the header is refused as not_json, as before).
	HeaderContentType = "Content-Type"
	// MaxBatchEnvelopes bounds the envelopes of one batch request, so that
	// its reply (about 100 bytes a line) fits a NATS message.
	MaxBatchEnvelopes = 1000
)

var ndjsonTypes = map[string]bool{
	"application/x-ndjson": true, "application/ndjson": true, "application/jsonl": true,
	"application/x-jsonl": true, "application/json-lines": true,
}

// batchItem is one envelope of a batch request: its line (NDJSON) or
// 1-based index (array), and its bytes.
type batchItem struct {
	no   int
	data []byte
}

// batchItems reports whether req is a batch request and, if so, its
// envelopes; the error refuses the whole request.
func batchItems(req micro.Request) ([]batchItem, bool, error) {
	data := req.Data()
	mt, _, _ := mime.ParseMediaType(req.Headers().Get(HeaderContentType))
	if ndjsonTypes[mt] {
		var items []batchItem
		err := ndjson.Split(bytes.NewReader(data), len(data)+1, func(l ndjson.Line) error {
			if len(items) == MaxBatchEnvelopes {
				return errTooMany
			}
			items = append(items, batchItem{no: l.No, data: l.Data})
			return nil
		})
		return items, true, err
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); mt != "application/json" || len(t) == 0 || t[0] != '[' {
		return nil, false, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(data, &arr); err != nil {
		return nil, true, fmt.Errorf("the batch is not a JSON array: %w", err)
	}
	if len(arr) > MaxBatchEnvelopes {
		return nil, true, errTooMany
	}
	items := make([]batchItem, len(arr))
	for i, r := range arr {
		items[i] = batchItem{no: i + 1, data: r}
	}
	return items, true, nil
}

var errTooMany = fmt.Errorf("a batch request takes at most %d envelopes", MaxBatchEnvelopes)

// acceptBatch is the first stage (see dispatch) of a batch request: it
// hands every envelope to the group commit in order, before any is
// awaited, so a batch request is stored in a few atomic batches; the
// second stage waits for them and replies with one result per envelope,
// as NDJSON, each naming its line (or array index). A refused envelope
// does not stop the others; the reply has no error status unless the
// whole request was refused (answered at once, counted by micro).
func (s *Service) acceptBatch(req micro.Request, space string, items []batchItem, err error) func() {
	if err != nil {
		code := api.CodeNotJSON
		if errors.Is(err, errTooMany) {
			code = api.CodeTooMany
		}
		s.refuse(req, &api.Error{Code: code, Message: err.Error()})
		return nil
	}
	force, _ := strconv.ParseBool(req.Headers().Get(HeaderKernel))
	mark := req.Headers().Get(ledger.HeaderBridge) // a bridge's session (contract §14), kept on every envelope's message
	if e := checkMark(mark); e != nil {
		s.refuse(req, e)
		return nil
	}
	senders, err := parseSenders(req.Headers().Get(HeaderSenders), len(items))
	if err != nil {
		s.refuse(req, &api.Error{Code: api.CodeBadValue, Field: HeaderSenders, Message: err.Error()})
		return nil
	}
	results := make([]ledger.Result, len(items))
	pending := make([]*appendlog.Pending, len(items))
	for i, it := range items {
		o := ledger.BodyOptions{Kernel: force, Bridge: mark}
		if senders != nil {
			o.Sender = senders[i]
		}
		if pending[i], err = s.opts.Appender.SubmitBody(s.ctx, space, it.data, o); err != nil {
			results[i].Err = err
		}
	}
	return func() { s.replyBatch(req, items, results, pending) }
}

// replyBatch waits for a batch request's appends and replies.
func (s *Service) replyBatch(req micro.Request, items []batchItem, results []ledger.Result, pending []*appendlog.Pending) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	for i, it := range items {
		if pending[i] != nil {
			results[i], _ = pending[i].Result(s.ctx)
		}
		res := results[i]
		switch r, refused := ledger.AsRefusal(res.Err); {
		case res.Err == nil:
			s.opts.Metrics.Appended(metrics.PathSubmit, res.Duplicate)
		case refused:
			s.opts.Metrics.Refused(metrics.PathSubmit, r.Code)
		default:
			s.opts.Metrics.AppendError(metrics.PathSubmit)
		}
		w := ledger.WireResult(res)
		w.Line = it.no
		_ = enc.Encode(w)
	}
	if req.Reply() == "" {
		return
	}
	if !subjects.IsInbox(req.Reply()) {
		// Only inboxes, as for single replies: the service publishes with
		// its own rights, which reach the event subjects.
		s.log.Warn().Str(logging.KeySubject, req.Reply()).Msg("submit reply subject is not an inbox (_INBOX.…): not answered")
		return
	}
	msg := &nats.Msg{Subject: req.Reply(), Data: out.Bytes(), Header: nats.Header{HeaderContentType: []string{"application/x-ndjson"}}}
	if err := s.nc.PublishMsg(msg); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Debug().Err(err).Msg("reply")
	}
}
