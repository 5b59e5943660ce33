package appendlog

import (
	"context"
	"sync"

	"github.com/mewledger/ledger/ledger"
)

// Answering an envelope this committer itself sent a moment ago without
// publishing it again (issue 38: several recorders of one MEW space send
// every envelope two or three times, seconds apart).
//
// The committer remembers, by Nats-Msg-Id, the last recentIDsCap
// envelopes it published (or found stored through the Index): a
// sentEntry, set when the envelope is resolved to the sequence its
// answer names. An envelope with the same Nats-Msg-Id (the same space,
// id and digest: ledger.Decoded.MsgID) and the same subject submitted
// later follows that entry: it is not published, and once the first
// one's batch is resolved (batches are resolved in the order they were
// sent, and a follower is always in a later batch than the envelope it
// follows) it is answered duplicate with the first one's sequence,
// which is where that very envelope (same subject, id and digest) is
// stored: the first was stored there from its own ack, or its own
// duplicate answer was verified against the stored message. When the
// first one failed (no sequence), the follower is published on its own
// as any fallback (publishOne): the log decides. An envelope with the
// same id and another digest has another Nats-Msg-Id and never follows:
// it takes the ordinary path (a duplicate answer that does not verify,
// then the id conflict the fold records).

// sentEntry is what the committer remembers of an envelope it sent.
// subject is set when the entry is made (gather); seq when the envelope
// is resolved (complete), read only by complete for the followers of
// later batches.
type sentEntry struct {
	subject string
	seq     uint64 // the sequence the envelope's answer names; 0: failed or not yet resolved
}

// sentMemo maps the Nats-Msg-Ids of the last n envelopes sent to their
// entries (a ring and a map).
type sentMemo struct {
	mu   sync.Mutex
	ring []string
	next int
	m    map[string]*sentEntry
}

func newSentMemo(n int) *sentMemo {
	return &sentMemo{ring: make([]string, n), m: make(map[string]*sentEntry, n)}
}

// get returns the entry of msgID, nil when none is remembered.
func (s *sentMemo) get(msgID string) *sentEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[msgID]
}

// put remembers e under msgID (a later send of the same id replaces the
// earlier entry).
func (s *sentMemo) put(msgID string, e *sentEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[msgID]; ok {
		s.m[msgID] = e
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = msgID
	s.m[msgID] = e
	s.next = (s.next + 1) % len(s.ring)
}

// follower returns the entry pd may follow: an envelope with its
// Nats-Msg-Id and subject sent earlier, nil when there is none.
func (c *groupCommitter) follower(pd *Pending) *sentEntry {
	e := c.sent.get(pd.p.MsgID)
	if e == nil || e.subject != pd.p.Subject {
		return nil
	}
	return e
}

// remember makes an entry for each member of b that leaves with it
// (published, or known through the Index), not for its followers.
func (c *groupCommitter) remember(b *batch) {
	all := b.items
	if b.all != nil {
		all = b.all
	}
	for _, pd := range all {
		if pd.follows != nil {
			continue
		}
		pd.entry = &sentEntry{subject: pd.p.Subject}
		c.sent.put(pd.p.MsgID, pd.entry)
	}
}

// splitFollowers takes b's followers out of b.items (into b.all, as
// members answered without a publish, like those the Index knows).
func (c *groupCommitter) splitFollowers(b *batch) {
	n := 0
	for _, pd := range b.items {
		if pd.follows != nil {
			n++
		}
	}
	if n == 0 {
		return
	}
	b.all, b.known = b.items, n
	b.items = make([]*Pending, 0, len(b.all)-n)
	for _, pd := range b.all {
		if pd.follows == nil {
			b.items = append(b.items, pd)
		}
	}
}

// followResult answers a follower: duplicate at the sequence of the
// envelope it follows, or, when that one failed, the stream's answer to
// its own publish.
func (c *groupCommitter) followResult(ctx context.Context, pd *Pending) ledger.Result {
	if seq := pd.follows.seq; seq != 0 {
		c.recentDups.Add(1)
		return ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject, Seq: seq, Duplicate: true}
	}
	return c.a.publishOne(ctx, pd.p)
}
