package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/mewledger/ledger/ledger"
)

// historyRecord is one line of the gateway's envelope-history.jsonl
// (gateway.ts createGatewayLogger): received (the real sending socket in
// participant), delivered (one per recipient) or rejected.
type historyRecord struct {
	Event       string          `json:"event"`
	ID          string          `json:"id"`
	Envelope    json.RawMessage `json:"envelope"`
	Participant string          `json:"participant"`
	SpaceID     string          `json:"space_id"`
	Metadata    struct {
		SourceParticipant string `json:"source_participant"`
	} `json:"metadata"`
}

// maxPending bounds the received records waiting for their delivery (a
// WebSocket envelope refused by a capability check has no rejected
// record: its received record would wait for ever).
const maxPending = 4096

// History turns the records of one space's envelope history into the
// envelopes to append, each with its real sender. Feed it every line in
// file order; it is not safe for concurrent use.
//
// Rules: a received record (not a join) remembers its participant under
// the envelope id; a rejected record forgets it; the first delivered
// record of an id takes the envelope as delivered (the gateway has
// normalised it: correlation_id an array, id and ts filled in) with the
// remembered participant as sender, and the delivered records of the
// same broadcast that follow are skipped. A delivered envelope without a
// received record (the file was started mid-broadcast, or a gateway
// system message) takes metadata.source_participant; with neither it is
// skipped (gateway messages).
type History struct {
	space   string
	pending map[string]string
	order   []string
	lastDel string
}

// NewHistory returns a History for the MEW space id (records of other
// spaces are ignored).
func NewHistory(mewSpace string) *History {
	return &History{space: mewSpace, pending: map[string]string{}}
}

// Delivery is an envelope to append under Sender.
type Delivery struct {
	Envelope []byte
	Sender   string
}

// Line reads one history line and returns the envelope it delivers, if
// any. A line that is not a history record is an error (and changes
// nothing).
func (h *History) Line(line []byte) (Delivery, bool, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Delivery{}, false, nil
	}
	var r historyRecord
	if err := json.Unmarshal(line, &r); err != nil {
		return Delivery{}, false, fmt.Errorf("bridge: history line is not a record: %w", err)
	}
	if r.SpaceID != "" && r.SpaceID != h.space {
		return Delivery{}, false, nil
	}
	switch r.Event {
	case "received":
		if r.ID == "" || r.Participant == "" {
			return Delivery{}, false, nil // a join handshake
		}
		h.remember(r.ID, r.Participant)
		if h.lastDel == r.ID {
			h.lastDel = "" // the id is used again: its deliveries are new
		}
	case "rejected":
		delete(h.pending, r.ID)
	case "delivered":
		if r.ID == "" || len(r.Envelope) == 0 || r.Envelope[0] != '{' {
			return Delivery{}, false, nil
		}
		sender, ok := h.pending[r.ID]
		if ok {
			delete(h.pending, r.ID)
		} else {
			if r.ID == h.lastDel {
				return Delivery{}, false, nil // another recipient of the same broadcast
			}
			sender = r.Metadata.SourceParticipant
		}
		h.lastDel = r.ID
		if sender == "" {
			return Delivery{}, false, nil
		}
		return Delivery{Envelope: r.Envelope, Sender: sender}, true, nil
	}
	return Delivery{}, false, nil
}

func (h *History) remember(id, participant string) {
	if _, ok := h.pending[id]; !ok {
		if len(h.order) >= maxPending {
			delete(h.pending, h.order[0])
			h.order = h.order[1:]
		}
		h.order = append(h.order, id)
	}
	h.pending[id] = participant
}

// follow reads the history file from its beginning and then as it grows,
// appending every lifecycle envelope it delivers under its real sender.
// It survives rotation (the file replaced: the old one is read to its end
// first) and truncation (read again from the start; lines written and cut
// meanwhile may be lost, which is reported as a gap).
func (b *Bridge) follow(ctx context.Context) error {
	h := NewHistory(b.opts.MEWSpace)
	path := b.opts.HistoryFile
	b.mu.Lock()
	b.firstAt = b.opts.Now()
	b.mu.Unlock()
	var (
		f      *os.File
		rd     *bufio.Reader
		offset int64
		waited bool
	)
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	open := func() error {
		nf, err := os.Open(path)
		if err != nil {
			return err
		}
		if f != nil {
			_ = f.Close()
		}
		f, rd, offset = nf, bufio.NewReaderSize(nf, 64<<10), 0
		b.setState(StateFollowing, "")
		b.log.Info().Str(KeyHistory, path).Msg("following the gateway's envelope history")
		return nil
	}
	var partial []byte
	for ctx.Err() == nil {
		if f == nil {
			if err := open(); err != nil {
				if !waited {
					b.log.Warn().Err(err).Str(KeyHistory, path).Msg("waiting for the history file")
					waited = true
				}
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					sleep(ctx, b.opts.PollInterval)
					continue
				}
				return fmt.Errorf("bridge: open %s: %w", path, err)
			}
		}
		chunk, err := rd.ReadBytes('\n')
		offset += int64(len(chunk))
		if err == nil {
			line := chunk
			if len(partial) > 0 {
				line = append(partial, chunk...)
				partial = nil
			}
			b.historyLine(ctx, h, line)
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("bridge: read %s: %w", path, err)
		}
		partial = append(partial, chunk...) // a line still being written
		if b.opts.Once {
			// A copied file: its last line may lack its newline.
			if len(bytes.TrimSpace(partial)) > 0 {
				b.historyLine(ctx, h, partial)
			}
			b.log.Info().Str(KeyHistory, path).Int64("bytes", offset).Msg("history file read to its end")
			return nil
		}
		// At the end: has the file been replaced or truncated?
		st, serr := os.Stat(path)
		cur, cerr := f.Stat()
		switch {
		case serr != nil || cerr != nil:
			// Gone (rotated away, not yet recreated): keep reading the old
			// file until a new one appears.
		case !os.SameFile(st, cur):
			// The old file may have grown between the read that hit its
			// end and the Stat that saw the new one (the writer finishes
			// its line in the old file, then opens the new one): read it
			// to its end before leaving it.
			for {
				chunk, err := rd.ReadBytes('\n')
				offset += int64(len(chunk))
				if err != nil {
					partial = append(partial, chunk...)
					if !errors.Is(err, io.EOF) {
						return fmt.Errorf("bridge: read %s: %w", path, err)
					}
					break
				}
				line := chunk
				if len(partial) > 0 {
					line = append(partial, chunk...)
					partial = nil
				}
				b.historyLine(ctx, h, line)
			}
			b.log.Info().Str(KeyHistory, path).Msg("history file rotated: reading the new one")
			if len(partial) > 0 {
				b.historyLine(ctx, h, partial)
				partial = nil
			}
			if err := open(); err != nil {
				continue
			}
			continue
		case cur.Size() < offset:
			now := b.opts.Now()
			b.log.Warn().Str(KeyHistory, path).Msg("history file truncated: reading it again from the start; lines cut before they were read are lost (recorded as a gap)")
			partial = nil
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("bridge: seek %s: %w", path, err)
			}
			rd.Reset(f)
			offset = 0
			b.q.push(item{gap: &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: path,
				NoticedAt: now, ReconnectedAt: now, Session: b.sessionID, Reason: "history file truncated"}})
			continue
		}
		sleep(ctx, b.opts.PollInterval)
	}
	return nil
}

// historyLine handles one line of the history file.
func (b *Bridge) historyLine(ctx context.Context, h *History, line []byte) {
	d, ok, err := h.Line(line)
	if err != nil {
		b.skip(KindNotJSON, "", ResultSkipped)
		b.log.Warn().Err(err).Msg("skipped a history line")
		return
	}
	if !ok {
		return
	}
	b.receive(ctx, d.Envelope, d.Sender)
}
