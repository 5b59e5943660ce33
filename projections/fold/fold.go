package fold

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/subjects"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/canon"
)

// Event is one stored message of the log, as the fold sees it.
type Event struct {
	Seq     uint64    // stream sequence: the event's position in the ledger
	Time    time.Time // stream timestamp: the ledger's time for the event
	Subject string    // the subject it was stored under
	Raw     []byte    // the original bytes, untouched
	// MsgIDClash is set when the message carries the header
	// Ledger-Msg-Id-Clash (HeaderMsgIDClash): the appender stored it under
	// a derived Nats-Msg-Id because another message held its own with
	// different bytes (contract §4). Each proposal it touches gets anomaly
	// msg_id_clash.
	MsgIDClash bool
	// Bridge is the message's HeaderBridge value ("" : none): it came
	// through that bridge session (contract §14).
	Bridge string
	// BridgeSeal is the message's HeaderBridgeSeal value ("" : none): the
	// ledger's seal of Bridge. The fold honours Bridge only when it
	// verifies under Folder.MarkKeys (marks.go).
	BridgeSeal string
	// MsgID and ClashID are the message's identity headers, which the
	// fold does not read: the Merkle tree's leaf holds them (contract §16,
	// package client/evidence). MsgID is the Nats-Msg-Id the message was
	// first appended with (ledger.MsgIdentity); ClashID the value of
	// HeaderMsgIDClash ("" when absent).
	MsgID, ClashID string

	pre *prepared // set by Folder.Prepare: the subject and decoding, worked out ahead
}

// HeaderMsgIDClash is the header the appender sets on a message it stored
// under a derived Nats-Msg-Id after a verified clash (contract §4); readers of
// the stream set Event.MsgIDClash from it.
const HeaderMsgIDClash = ledger.HeaderMsgIDClash

// EventFlags are facts about a stored event the fold needs besides its
// bytes, kept with a parked orphan so that it folds the same on release.
type EventFlags uint8

// The event flags.
const (
	// FlagIDReused: the event reuses an id an earlier, different event had
	// (contract §5.2).
	FlagIDReused EventFlags = 1 << iota
	// FlagMsgIDClash: Event.MsgIDClash.
	FlagMsgIDClash
)

// Outcome reports one history entry the fold wrote while applying an event
// (an event that names several proposals, or that releases orphans, writes
// several).
type Outcome struct {
	Space  string
	Key    string // proposal id (or the id an unattributed event was filed under)
	Seq    uint64 // the sequence of the event the entry is for
	Effect api.Effect
}

// Folder applies events to a State. It holds no state of its own and is safe
// for concurrent use; each State must be used by one goroutine at a time.
type Folder struct {
	// WithoutCoverage skips the recorders' runs and gap window ends
	// (holes.go): for `ledger bench` only, which measures their cost. A
	// projection folded so serves wrong holes and covered gaps.
	// A State that is a CoverageSkipper is told so, and skips its own
	// coverage work too (the projection's hole changes).
	WithoutCoverage bool
	// MarkKeys verify the seals of bridge marks (ledger.HeaderBridgeSeal,
	// marks.go): an input of the fold like its options, the same for the
	// live projection, rebuild and as-of folds of one ledger. Nil: no
	// mark is honoured.
	MarkKeys *ledger.MarkKeys
}

// CoverageSkipper is a State with coverage work of its own (the
// projection's hole changes) that a fold WithoutCoverage turns off.
type CoverageSkipper interface {
	SkipCoverage()
}

// NewFolder returns a Folder.
func NewFolder() *Folder { return &Folder{} }

// Reason codes known to the protocol (contract §2). Any other string is kept as
// given and counted under "other" in statistics.
var knownReasons = []string{"disagree", "inappropriate", "unsafe", "busy", "incapable", "policy",
	"duplicate", "invalid", "timeout", "resource_limit", "no_longer_needed", "other"}

// ReasonBucket returns the statistics bucket of a reason code: the code when
// the protocol knows it, "other" for anything else (including none).
func ReasonBucket(reason string) string {
	if slices.Contains(knownReasons, reason) {
		return reason
	}
	return "other"
}

// Fold-level refusal codes (HistoryEntry.Code of invalid events that decoded).
const (
	CodeBadSubject      = "bad_subject"      // subject is not a valid ledger event subject
	CodeSubjectMismatch = "subject_mismatch" // subject key/type does not match the envelope
	CodeSpoofedSender   = "spoofed_sender"   // subject sender differs from the envelope's from
	CodeIDConflict      = "id_conflict"      // id reused with different content
	CodeNotAProposal    = "not_a_proposal"   // names an event that is not a proposal
	CodeBadExpiry       = "bad_expiry"       // ledger/expire not written by the ledger or before the deadline
)

// Apply folds one event into st, in stream order, and returns the history
// entries it wrote. It is deterministic: the result depends only on st and
// ev. Bad input never returns an error — it is recorded (effect invalid,
// ignored, ...) — so the only errors are st's storage errors, after which the
// caller must discard everything written through st for this batch.
func (f *Folder) Apply(st State, ev Event) ([]Outcome, error) {
	if f.WithoutCoverage {
		if cs, ok := st.(CoverageSkipper); ok {
			cs.SkipCoverage()
		}
	}
	if r, ok := st.(EventRecorder); ok {
		if ev.pre == nil {
			ev.pre = decodeEvent(&ev) // decoded once, for the recorder and arrive
		}
		if err := r.RecordEvent(&ev); err != nil {
			return nil, err
		}
	}
	a := &applier{st: st, trigger: ev, noCoverage: f.WithoutCoverage}
	if ev.Bridge != "" && ev.pre == nil {
		ev.pre = decodeEvent(&ev)
	}
	if err := a.arrive(ev); err != nil {
		return nil, err
	}
	if ev.Bridge != "" {
		if err := a.bridgeMarked(ev, f.MarkKeys); err != nil {
			return nil, err
		}
	}
	if err := a.drain(); err != nil {
		return nil, err
	}
	if err := a.flushStats(); err != nil {
		return nil, err
	}
	return a.out, nil
}

// applier is the working state of one Apply call.
type applier struct {
	st         State
	noCoverage bool  // Folder.WithoutCoverage
	trigger    Event // the arriving event (released orphans are folded on its behalf)
	out        []Outcome
	released   orphanHeap
	decoded    map[released]*ledger.Decoded // released events decoded, by (space, seq)
	stats      []spaceStats                 // in first-touch order, for deterministic writes (an event touches one space, rarely two)
}

// spaceStats is the statistics of one space an Apply call changes.
type spaceStats struct {
	space string
	s     *api.Stats
}

// ctx is one event being applied: decoded, with its space and history base.
type evctx struct {
	ev       Event
	space    string
	d        *ledger.Decoded
	entry    api.HistoryEntry // template for this event's history entries
	resolved bool             // folded on release from orphan
	flags    EventFlags
	// reusedSeq is the sequence of the earlier event whose id this one
	// reuses (FlagIDReused), when known (not after a release from orphan).
	reusedSeq uint64
}

// duplicateOf returns the sequence of the earlier event c's event repeats
// (same id and digest): ref itself, or a version of the id that ref
// superseded; 0 when it is a different event.
func (a *applier) duplicateOf(c *evctx, ref *EventRef) (uint64, error) {
	if ref.Digest == c.d.Digest {
		return ref.Seq, nil
	}
	return a.st.Version(c.space, c.d.Env.ID, c.d.Digest)
}

func (a *applier) statsFor(space string) (*api.Stats, error) {
	for _, ss := range a.stats {
		if ss.space == space {
			return ss.s, nil
		}
	}
	var s *api.Stats
	if ms, ok := a.st.(StatsMutator); ok {
		var err error
		if s, err = ms.MutableStats(space); err != nil {
			return nil, err
		}
	} else {
		var err error
		if s, err = a.st.Stats(space); err != nil {
			return nil, err
		}
		if s == nil {
			s = api.NewStats()
		} else {
			s = s.Clone()
		}
	}
	a.stats = append(a.stats, spaceStats{space, s})
	return s, nil
}

// StatsMutator is an optional interface of a [State] that hands out a
// private copy of a space's stats for the caller to change in place (the
// Pebble store's batch implements it): the fold then skips cloning them for
// every event. MutableStats returns the space's current stats (a fresh
// [api.NewStats] when it has none), which only the caller changes until
// it writes them back with PutStats, as it does all the same.
type StatsMutator interface {
	MutableStats(space string) (*api.Stats, error)
}

func (a *applier) flushStats() error {
	for _, ss := range a.stats {
		if err := a.st.PutStats(ss.space, ss.s); err != nil {
			return err
		}
	}
	return nil
}

// record files a history entry and counts its effect.
func (a *applier) record(space, key string, h api.HistoryEntry) error {
	s, err := a.statsFor(space)
	if err != nil {
		return err
	}
	s.Effects[string(h.Effect)]++
	a.out = append(a.out, Outcome{Space: space, Key: key, Seq: h.Seq, Effect: h.Effect})
	return a.st.PutHistory(space, key, &h)
}

// file records an entry that is not folded into a proposal (duplicate,
// invalid, ignored) under key, and counts it in that proposal's Events when
// key names one, so that Events always equals the length of its history.
func (a *applier) file(space, key string, h api.HistoryEntry) error {
	p, err := a.st.Proposal(space, key)
	if err != nil {
		return err
	}
	if p != nil {
		p = p.Clone()
		p.Events++
		for _, an := range h.Anomalies {
			if err := a.addAnomaly(space, p, an); err != nil {
				return err
			}
		}
		a.touch(p)
		if err := a.st.PutProposal(p); err != nil {
			return err
		}
	} else {
		// Counted when (if ever) key becomes a proposal.
		n, err := a.st.Filed(space, key)
		if err != nil {
			return err
		}
		if err := a.st.PutFiled(space, key, n+1); err != nil {
			return err
		}
	}
	return a.record(space, key, h)
}

// bestEffortID returns the envelope's id when the bytes are JSON with a
// string id, else "": shown on an invalid event's history entry.
func bestEffortID(raw []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	id, _ := v.ID.(string)
	if len(id) > ledger.MaxIDBytes || !utf8.ValidString(id) {
		return ""
	}
	return id
}

// arrive folds a newly arrived event: parse, decode, check, dedup, dispatch.
func (a *applier) arrive(ev Event) error {
	at := ev.Time.UTC()
	pr := ev.pre
	if pr == nil {
		pr = decodeEvent(&ev)
	}
	subj, serr := pr.subj, pr.serr
	space, key := subj.Space, subj.Key
	if serr != nil {
		space, key = subjects.FiledUnder(ev.Subject)
	}
	s, err := a.statsFor(space)
	if err != nil {
		return err
	}
	s.Events++
	base := api.HistoryEntry{Seq: ev.Seq, At: at, Type: subj.Type, From: subj.Sender}
	invalid := func(code, detail string) error {
		s.EventsByType[string(ledger.TypeInvalid)]++
		h := base
		h.Effect, h.Code, h.Detail = api.EffectInvalid, code, detail
		return a.file(space, key, h)
	}
	if serr != nil {
		return invalid(CodeBadSubject, serr.Error())
	}
	d, err := pr.d, pr.derr
	if err != nil {
		r, ok := ledger.AsRefusal(err)
		if !ok {
			return invalid("undecodable", err.Error())
		}
		detail := r.Message
		if r.Field != "" {
			detail += " (field " + r.Field + ")"
		}
		base.ID = bestEffortID(ev.Raw)
		return invalid(r.Code, detail)
	}
	base.ID, base.Type, base.Kind, base.From, base.Reason = d.Env.ID, string(d.Type), d.OrigKind, d.Env.From, d.Reason
	base.Form = d.Form
	if n := d.Note; n != nil {
		base.Note, base.Status = n.Kind, n.Status
	}
	c := &evctx{ev: ev, space: space, d: d, entry: base}
	if ev.MsgIDClash {
		c.flags |= FlagMsgIDClash
	}

	// The sender first, whatever the kind (an ignored kind too).
	if subj.Sender != d.Env.From {
		return invalid(CodeSpoofedSender, fmt.Sprintf("subject sender %q but the envelope is from %q", subj.Sender, d.Env.From))
	}
	if d.Type == ledger.TypeIgnored {
		s.EventsByType[string(ledger.TypeIgnored)]++
		// Indexed, so that a retry is a duplicate and a response to it is ignored.
		ref, err := a.st.EventRef(space, d.Env.ID)
		if err != nil {
			return err
		}
		h := base
		if ref != nil {
			if dup, err := a.duplicateOf(c, ref); err != nil || dup != 0 {
				if err != nil {
					return err
				}
				h.Effect, h.Detail = api.EffectDuplicate, fmt.Sprintf("same envelope as seq %d", dup)
				return a.file(space, key, h)
			}
			// A different event reusing the id: the latest holds it.
			if err := a.st.PutVersion(space, d.Env.ID, ref.Digest, ref.Seq); err != nil {
				return err
			}
			h.Detail = fmt.Sprintf("; id %q reused (an earlier, different event had it at seq %d)", d.Env.ID, ref.Seq)
		}
		if err := a.st.PutEventRef(space, d.Env.ID, &EventRef{Seq: ev.Seq, Type: d.Type, Digest: d.Digest, From: d.Env.From, Status: EventIgnored}); err != nil {
			return err
		}
		h.Effect, h.Detail = api.EffectIgnored, fmt.Sprintf("kind %q is not part of the proposal lifecycle", d.OrigKind)+h.Detail
		return a.file(space, key, h)
	}
	switch {
	case subj.Type != string(d.Type):
		return invalid(CodeSubjectMismatch, fmt.Sprintf("subject type token %q but the envelope is a %s", subj.Type, d.Type))
	case subj.Key != d.Key:
		return invalid(CodeSubjectMismatch, fmt.Sprintf("subject key %q but the envelope's correlation key is %q", subj.Key, d.Key))
	case subj.Sender != d.Env.From:
		return invalid(CodeSpoofedSender, fmt.Sprintf("subject sender %q but the envelope is from %q", subj.Sender, d.Env.From))
	}

	s.EventsByType[string(d.Type)]++

	// Reserved kinds and ids (contract §5.6, §14): refused before the event
	// index sees them, so that a squatter can neither block nor fake what
	// only the ledger writes.
	if code, detail := reserved(d); code != "" {
		s.EventsByType[string(d.Type)]--
		return invalid(code, detail)
	}

	// Dedup by envelope id, for ever.
	ref, err := a.st.EventRef(space, d.Env.ID)
	if err != nil {
		return err
	}
	// A ledger/expire the fold refused (appended before the deadline by a
	// skewed clock) does not block the expirer's later retry of the same id.
	if ref != nil && !(d.Type == ledger.TypeExpire && ref.Status == EventInvalid) {
		h := base
		dup, err := a.duplicateOf(c, ref)
		if err != nil {
			return err
		}
		if dup != 0 {
			h.Effect, h.Detail = api.EffectDuplicate, fmt.Sprintf("same envelope as seq %d", dup)
			return a.file(space, key, h)
		}
		if d.Type == ledger.TypeProposal || d.Type == ledger.TypeGap {
			h.Effect, h.Code = api.EffectInvalid, CodeIDConflict
			h.Detail = fmt.Sprintf("id %q already used by a different envelope at seq %d", d.Env.ID, ref.Seq)
			p, err := a.st.Proposal(space, key)
			if err != nil {
				return err
			}
			if p != nil {
				h.Anomalies = []string{api.AnomalyIDConflict}
			}
			return a.file(space, key, h)
		}
		// contract §5.2: a non-proposal event reusing the id of an earlier,
		// different event is a new event, folded on its own merits; from
		// now on the id names it (the latest), and the superseded one is
		// remembered so that its retry stays a duplicate.
		if err := a.st.PutVersion(space, d.Env.ID, ref.Digest, ref.Seq); err != nil {
			return err
		}
		c.flags |= FlagIDReused
		c.reusedSeq = ref.Seq
	}
	status := EventOrphan
	if d.Type == ledger.TypeGap {
		status = EventRecorded
	}
	if err := a.st.PutEventRef(space, d.Env.ID, &EventRef{Seq: ev.Seq, Type: d.Type, Digest: d.Digest, From: d.Env.From, Status: status}); err != nil {
		return err
	}

	switch d.Type {
	case ledger.TypeProposal:
		return a.create(c)
	case ledger.TypeGap:
		return a.gap(c)
	}
	for _, t := range d.Targets {
		if err := a.applyTo(c, t); err != nil {
			return err
		}
	}
	return nil
}

// Reserved id prefixes (contract §5.6, §14, ledger.ReservedIDPrefixes): the
// ids of the events only the ledger writes.
const (
	reservedExpirePrefix = "expire:"
	reservedGapPrefix    = "gap:"
)

// reserved returns the refusal code and detail of an event that uses what
// only the ledger may: a ledger/gap not from the ledger (reserved_kind), or
// an id beginning "expire:" or "gap:" on anything but the ledger's own
// ledger/expire or ledger/gap (reserved_id). A ledger/expire from anyone
// else is judged by expire (bad_expiry), as before. "" when none.
func reserved(d *ledger.Decoded) (code, detail string) {
	fromLedger := d.Env.From == ledger.LedgerSender
	switch {
	case d.Type == ledger.TypeGap && !fromLedger:
		return api.CodeReservedKind, fmt.Sprintf("%s is written only by %q", ledger.KindGap, ledger.LedgerSender)
	case strings.HasPrefix(d.Env.ID, reservedExpirePrefix) && !(d.Type == ledger.TypeExpire && fromLedger):
		return api.CodeReservedID, fmt.Sprintf("ids beginning %q are reserved for the ledger's own %s", reservedExpirePrefix, ledger.KindExpire)
	case strings.HasPrefix(d.Env.ID, reservedGapPrefix) && !(d.Type == ledger.TypeGap && fromLedger):
		return api.CodeReservedID, fmt.Sprintf("ids beginning %q are reserved for the ledger's own %s", reservedGapPrefix, ledger.KindGap)
	}
	return "", ""
}

// gap records a bridge's recording gap (contract §14) in its space: not a
// proposal's event, filed under its own id (reserved: no proposal has it).
func (a *applier) gap(c *evctx) error {
	g := c.d.Gap
	rec := &api.Gap{
		Seq: c.ev.Seq, At: c.ev.Time.UTC(), ID: c.d.Env.ID, Bridge: g.Bridge, MEWSpace: g.MEWSpace,
		Gateway: g.Gateway, LastEnvelope: g.LastEnvelope, LastSeq: g.LastSeq, DisconnectedAt: g.DisconnectedAt, Reason: g.Reason,
		Session: g.Session, Dropped: g.Dropped,
	}
	if !g.ReconnectedAt.IsZero() {
		t := g.ReconnectedAt
		rec.ReconnectedAt = &t
	}
	if !g.NoticedAt.IsZero() {
		t := g.NoticedAt
		rec.NoticedAt = &t
	}
	// The bridge's session record: a gap that starts at (or after) its
	// last stored envelope puts its hole on the record.
	bkey := BridgeKey(g.Bridge, g.MEWSpace)
	bs, err := a.st.BridgeSession(c.space, bkey)
	if err != nil {
		return err
	}
	b := api.BridgeSession{Bridge: g.Bridge, MEWSpace: g.MEWSpace, Session: g.Session, State: api.BridgeGap}
	if bs != nil {
		b = *bs
	}
	if bs == nil || g.LastSeq >= b.LastSeq {
		b.State, b.GapSeq = api.BridgeGap, c.ev.Seq
		if g.Session != "" {
			b.Session = g.Session
		}
	}
	b.Gaps++
	if err := a.recorderGap(c.space, bkey, &b, g, rec); err != nil {
		return err
	}
	if err := a.st.PutGap(c.space, rec); err != nil {
		return err
	}
	if err := a.st.PutBridgeSession(c.space, bkey, &b); err != nil {
		return err
	}
	s, err := a.statsFor(c.space)
	if err != nil {
		return err
	}
	s.Gaps++
	detail := fmt.Sprintf("recording gap of bridge %q", g.Bridge)
	if g.Reason != "" {
		detail += ": " + g.Reason
	}
	return a.record(c.space, c.d.Env.ID, a.entryFor(c, api.EffectApplied, detail))
}

// BridgeKey is the key of a bridge's session record in its ledger space:
// its participant and the MEW space it records.
func BridgeKey(bridge, mewSpace string) string { return bridge + "\x00" + mewSpace }

// bridgeStored notes an event stored with a bridge's mark (whatever its
// effect: the bridge delivered it): the bridge's last stored envelope, in
// its session. A mark that does not parse (written by hand) is ignored.
func (a *applier) bridgeStored(ev Event) error {
	pr := ev.pre
	if pr.serr != nil {
		return nil
	}
	m, err := ledger.ParseBridgeMark(ev.Bridge)
	if err != nil {
		return nil
	}
	space, key := pr.subj.Space, BridgeKey(m.Bridge, m.MEWSpace)
	rec, err := a.st.BridgeSession(space, key)
	if err != nil {
		return err
	}
	r := api.BridgeSession{Bridge: m.Bridge, MEWSpace: m.MEWSpace}
	if rec != nil {
		r = *rec
	}
	newSession := rec == nil || rec.Session != m.Session
	prevLast := r.LastSeq
	r.History = m.History
	r.Session, r.State, r.GapSeq = m.Session, api.BridgeRecording, 0
	r.LastSeq = ev.Seq
	if pr.d != nil {
		r.LastEnvelope = pr.d.Env.ID
	} else {
		r.LastEnvelope = bestEffortID(ev.Raw)
	}
	if err := a.recorderStored(space, key, &r, prevLast, newSession, m, ev.Seq); err != nil {
		return err
	}
	r.LastReceivedAt = nil
	if !m.Received.IsZero() {
		t := m.Received
		r.LastReceivedAt = &t
	}
	at := ev.Time.UTC()
	r.LastStoredAt = &at
	r.Envelopes++
	return a.st.PutBridgeSession(space, key, &r)
}

// drain folds released orphans, lowest sequence first, until none is left.
func (a *applier) drain() error {
	for a.released.Len() > 0 {
		r := heap.Pop(&a.released).(released)
		space, o := r.space, r.o
		pk, err := a.st.Parked(space, o.Seq)
		if err != nil {
			return err
		}
		if pk == nil {
			return fmt.Errorf("projections: orphan seq %d waiting for %q in space %q: parked event missing", o.Seq, o.Target, space)
		}
		if pk.Refs--; pk.Refs <= 0 {
			err = a.st.PutParked(space, o.Seq, nil)
		} else {
			err = a.st.PutParked(space, o.Seq, pk)
		}
		if err != nil {
			return err
		}
		at := pk.Time.UTC()
		// One message waiting for many ids is decoded once, not per id.
		dk := released{space: space, o: Orphan{Seq: o.Seq}}
		d, ok := a.decoded[dk]
		if !ok {
			if d, err = ledger.Decode(pk.Raw, ledger.DecodeOptions{Now: at}); err != nil {
				return fmt.Errorf("projections: orphan seq %d: no longer decodes: %w", o.Seq, err)
			}
			if a.decoded == nil {
				a.decoded = map[released]*ledger.Decoded{}
			}
			a.decoded[dk] = d
		}
		if err := a.st.DeleteHistory(space, o.Target, o.Seq); err != nil {
			return err
		}
		s, err := a.statsFor(space)
		if err != nil {
			return err
		}
		s.OrphansWaiting--
		s.Effects[string(api.EffectOrphan)]--
		c := &evctx{
			ev: Event{Seq: o.Seq, Time: pk.Time, Subject: pk.Subject, Raw: pk.Raw, MsgIDClash: pk.Flags&FlagMsgIDClash != 0}, space: space, d: d, resolved: true, flags: pk.Flags,
			entry: api.HistoryEntry{Seq: o.Seq, At: at, ID: d.Env.ID, Type: string(d.Type), Kind: d.OrigKind, From: d.Env.From, Reason: d.Reason, Form: d.Form},
		}
		if n := d.Note; n != nil {
			c.entry.Note, c.entry.Status = n.Kind, n.Status
		}
		if err := a.applyTo(c, o.Target); err != nil {
			return err
		}
	}
	return nil
}

// entry returns a fresh history entry for c.
func (a *applier) entryFor(c *evctx, eff api.Effect, detail string) api.HistoryEntry {
	h := c.entry
	h.Effect, h.Detail = eff, detail
	if c.resolved {
		h.ResolvedSeq = a.trigger.Seq
	}
	return h
}

// touch stamps p as changed by the arriving event.
func (a *applier) touch(p *api.Proposal) {
	p.UpdatedSeq = a.trigger.Seq
	p.UpdatedAt = a.trigger.Time.UTC()
}

func (a *applier) addAnomaly(space string, p *api.Proposal, an string) error {
	if p.HasAnomaly(an) {
		return nil
	}
	p.Anomalies = append(p.Anomalies, an)
	s, err := a.statsFor(space)
	if err != nil {
		return err
	}
	s.Anomalies[an]++
	return nil
}

func (a *applier) setState(space string, p *api.Proposal, to api.ProposalState) error {
	s, err := a.statsFor(space)
	if err != nil {
		return err
	}
	s.ByState[string(p.State)]--
	s.ByState[string(to)]++
	p.State = to
	return nil
}

func (a *applier) decide(c *evctx, p *api.Proposal, to api.ProposalState, reason string) error {
	if err := a.setState(c.space, p, to); err != nil {
		return err
	}
	p.DecidedBy, p.DecidedEvent, p.DecidedSeq, p.Reason = c.d.Env.From, c.d.Env.ID, c.ev.Seq, reason
	return nil
}

// create folds a proposal.
func (a *applier) create(c *evctx) error {
	d, at := c.d, c.ev.Time.UTC()
	p := &api.Proposal{
		ID: d.Env.ID, Space: c.space, State: api.StatePending, Proposer: d.Env.From,
		To: append([]string{}, d.Env.To...), Method: d.Method, Params: d.Params,
		Dialect: d.Dialect, Kind: d.Env.Kind, Context: d.Env.Context,
		CreatedSeq: c.ev.Seq, CreatedAt: at,
		Rejections: []api.Rejection{}, Fulfillments: []api.Fulfillment{}, Anomalies: []string{},
		Digest: d.Digest,
	}
	var deadline *time.Time
	if d.TTLms > 0 {
		t := at.Add(time.Duration(d.TTLms) * time.Millisecond)
		deadline = &t
	}
	if k := d.Kernel; k != nil {
		// contract §12. d.Method/d.Params are "kernel/<action_type>" and the
		// parameters, so fulfilment checks compare against them.
		kr := &api.Kernel{ActionType: k.ActionType, Target: k.Target, ApprovalClass: k.ApprovalClass, Form: api.KernelFormProposal}
		kr.Required, kr.Approvers = k.RequiredApprovals()
		kr.Approvers = slices.Clone(kr.Approvers)
		if kr.ApprovalClass == "" {
			kr.ApprovalClass = api.ApprovalNone
		}
		if k.Request != nil {
			kr.Form, kr.Intent = api.KernelFormRequest, k.Request.Intent
		}
		// time_window.valid_until_ms is the deadline (exclusive: the permit
		// is valid before it), which the expirer turns into ledger/expire.
		if w := k.TimeWindow; w != nil {
			kr.ValidFromMs, kr.ValidUntilMs = w.ValidFromMs, w.ValidUntilMs
			if w.ValidUntilMs > 0 {
				t := time.UnixMilli(w.ValidUntilMs).UTC()
				if deadline == nil || t.Before(*deadline) {
					deadline = &t
				}
			}
		}
		approved := kr.Required == 0
		p.Kernel, p.Approved, p.Approvals = kr, &approved, []api.Approval{}
	}
	p.ExpiresAt = deadline
	p.Targets = targetsOf(d.TargetSources)
	if t := d.Targeting; t != nil && t.Exclusive {
		x := &api.ExclusiveWindow{TimeoutMs: t.WindowMs, FallbackToBroadcast: t.FallbackToBroadcast, QuickReject: t.QuickReject}
		if t.WindowMs > 0 {
			u := at.Add(time.Duration(t.WindowMs) * time.Millisecond)
			x.Until = &u
		}
		p.Exclusive = x
	}
	if d.Form != "" {
		p.Forms = []string{d.Form}
	}
	a.touch(p)
	// Entries filed under this id before it was a proposal are in its
	// history: count them (orphans are counted as they are released).
	filed, err := a.st.Filed(c.space, p.ID)
	if err != nil {
		return err
	}
	if filed > 0 {
		if err := a.st.PutFiled(c.space, p.ID, 0); err != nil {
			return err
		}
	}
	p.Events = 1 + filed
	s, err := a.statsFor(c.space)
	if err != nil {
		return err
	}
	s.Proposals++
	s.ByState[string(api.StatePending)]++
	h := a.entryFor(c, api.EffectApplied, "")
	if c.flags&FlagMsgIDClash != 0 {
		h.Anomalies = []string{api.AnomalyMsgIDClash}
		if err := a.addAnomaly(c.space, p, api.AnomalyMsgIDClash); err != nil {
			return err
		}
	}
	if err := a.st.PutProposal(p); err != nil {
		return err
	}
	if err := a.record(c.space, p.ID, h); err != nil {
		return err
	}
	return a.markApplied(c, p.ID)
}

// markApplied notes in the event-id index that c's event was applied to
// proposal pid; the first time, events waiting for c's id are released.
func (a *applier) markApplied(c *evctx, pid string) error {
	ref, err := a.st.EventRef(c.space, c.d.Env.ID)
	if err != nil {
		return err
	}
	if ref == nil { // cannot happen: arrive indexes every lifecycle event
		return fmt.Errorf("projections: event %q (seq %d) missing from the event index", c.d.Env.ID, c.ev.Seq)
	}
	if ref.Seq != c.ev.Seq {
		// A later event reused the id while this one waited as an
		// orphan: the id names the later one now (contract §5.2).
		return nil
	}
	first := ref.Status != EventApplied
	if slices.Contains(ref.Proposals, pid) && !first {
		return nil
	}
	r := *ref
	r.Proposals = append(slices.Clone(ref.Proposals), pid)
	r.Status = EventApplied
	if err := a.st.PutEventRef(c.space, c.d.Env.ID, &r); err != nil {
		return err
	}
	if !first {
		return nil
	}
	return a.release(c.space, c.d.Env.ID)
}

// markRefused marks c's event as refused by the fold in the event index.
func (a *applier) markRefused(c *evctx) error {
	ref, err := a.st.EventRef(c.space, c.d.Env.ID)
	if err != nil || ref == nil || ref.Seq != c.ev.Seq {
		return err
	}
	r := *ref
	r.Status = EventInvalid
	return a.st.PutEventRef(c.space, c.d.Env.ID, &r)
}

// release moves the events waiting for id into the release heap.
func (a *applier) release(space, id string) error {
	// Stats.OrphansWaiting counts the entries of the space's orphan lists
	// (both change in the same Apply; TestOrphansWaitingCountsEveryList):
	// when it is 0 there is no list to read. Most events are never waited
	// for, and this read of an absent key was a third of the fold's Pebble
	// reads.
	s, err := a.statsFor(space)
	if err != nil || s.OrphansWaiting == 0 {
		return err
	}
	waiting, err := a.st.Orphans(space, id)
	if err != nil || len(waiting) == 0 {
		return err
	}
	if err := a.st.PutOrphans(space, id, nil); err != nil {
		return err
	}
	for _, o := range waiting {
		heap.Push(&a.released, released{space: space, o: o})
	}
	return nil
}

// orphan files c as waiting for target.
func (a *applier) orphan(c *evctx, target, detail string) error {
	waiting, err := a.st.Orphans(c.space, target)
	if err != nil {
		return err
	}
	// Park the event's bytes once, whatever the number of ids it waits for.
	pk, err := a.st.Parked(c.space, c.ev.Seq)
	if err != nil {
		return err
	}
	if pk == nil {
		pk = &ParkedEvent{Time: c.ev.Time.UTC(), Subject: c.ev.Subject, Raw: c.ev.Raw, Flags: c.flags}
	}
	pk.Refs++
	if err := a.st.PutParked(c.space, c.ev.Seq, pk); err != nil {
		return err
	}
	o := Orphan{Seq: c.ev.Seq, Target: target}
	waiting = append(slices.Clone(waiting), o)
	slices.SortStableFunc(waiting, func(x, y Orphan) int { return cmpUint(x.Seq, y.Seq) })
	if err := a.st.PutOrphans(c.space, target, waiting); err != nil {
		return err
	}
	s, err := a.statsFor(c.space)
	if err != nil {
		return err
	}
	s.OrphansWaiting++
	return a.record(c.space, target, a.entryFor(c, api.EffectOrphan, detail))
}

func cmpUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// applyTo applies a non-proposal event to one of the ids it names.
func (a *applier) applyTo(c *evctx, target string) error {
	switch c.d.Type {
	case ledger.TypeResponse:
		return a.response(c, target)
	case ledger.TypeNote:
		return a.note(c, target)
	}
	p, err := a.st.Proposal(c.space, target)
	if err != nil {
		return err
	}
	if p == nil {
		ref, err := a.st.EventRef(c.space, target)
		if err != nil {
			return err
		}
		if ref != nil && ref.Type != ledger.TypeProposal {
			h := a.entryFor(c, api.EffectInvalid, fmt.Sprintf("%q is a %s event (seq %d), not a proposal", target, ref.Type, ref.Seq))
			h.Code = CodeNotAProposal
			if err := a.markRefused(c); err != nil {
				return err
			}
			return a.record(c.space, target, h)
		}
		return a.orphan(c, target, fmt.Sprintf("waiting for proposal %q", target))
	}
	p = p.Clone()
	var h api.HistoryEntry
	if c.d.Type == ledger.TypeExpire {
		h, err = a.expire(c, p)
		if err == nil && h.Effect == api.EffectInvalid {
			// Not applied: file it under the proposal, and mark it refused in
			// the event index so that a later retry is judged afresh.
			if err := a.markRefused(c); err != nil {
				return err
			}
			p.Events++
			a.touch(p)
			if err := a.st.PutProposal(p); err != nil {
				return err
			}
			return a.record(c.space, p.ID, h)
		}
	} else {
		detail, derr := a.expireIfDue(c, p)
		if derr != nil {
			return derr
		}
		switch c.d.Type {
		case ledger.TypeWithdraw:
			h, err = a.withdraw(c, p)
		case ledger.TypeReject:
			h, err = a.reject(c, p)
		case ledger.TypeFulfil:
			h, err = a.fulfil(c, p)
		case ledger.TypeApprove:
			h, err = a.approve(c, p)
		default:
			return fmt.Errorf("projections: unexpected event type %q", c.d.Type)
		}
		if detail != "" {
			h.Detail = strings.TrimPrefix(h.Detail+"; "+detail, "; ")
		}
	}
	if err != nil {
		return err
	}
	return a.commitTo(c, p, h)
}

// commitTo writes p and its new history entry, and marks the event applied.
// The event's flags add their anomalies (id_reused, msg_id_clash).
func (a *applier) commitTo(c *evctx, p *api.Proposal, h api.HistoryEntry) error {
	if c.flags != 0 {
		h.Anomalies = slices.Clone(h.Anomalies)
		if c.flags&FlagIDReused != 0 {
			h.Anomalies = append(h.Anomalies, api.AnomalyIDReused)
			if c.reusedSeq != 0 {
				h.Detail = strings.TrimPrefix(h.Detail+fmt.Sprintf("; id %q reused (an earlier, different event had it at seq %d)", c.d.Env.ID, c.reusedSeq), "; ")
			}
		}
		if c.flags&FlagMsgIDClash != 0 {
			h.Anomalies = append(h.Anomalies, api.AnomalyMsgIDClash)
		}
	}
	for _, an := range h.Anomalies {
		if err := a.addAnomaly(c.space, p, an); err != nil {
			return err
		}
	}
	if f := c.d.Form; f != "" && !slices.Contains(p.Forms, f) {
		p.Forms = append(p.Forms, f)
	}
	p.Events++
	a.touch(p)
	if err := a.st.PutProposal(p); err != nil {
		return err
	}
	if err := a.record(c.space, p.ID, h); err != nil {
		return err
	}
	return a.markApplied(c, p.ID)
}

// expireIfDue moves a pending proposal whose deadline has passed at the
// event's stream time to expired before the event is applied, so that an
// event after the deadline is judged against the expired state even when the
// ledger/expire event has not been appended yet. It returns a detail for the
// event's history entry, or "".
func (a *applier) expireIfDue(c *evctx, p *api.Proposal) (string, error) {
	if p.State != api.StatePending || p.ExpiresAt == nil || c.ev.Time.Before(*p.ExpiresAt) {
		return "", nil
	}
	if err := a.setState(c.space, p, api.StateExpired); err != nil {
		return "", err
	}
	p.DecidedBy, p.DecidedEvent, p.DecidedSeq, p.Reason = ledger.LedgerSender, "", 0, "deadline"
	return fmt.Sprintf("the proposal expired at its deadline %s, before this event", p.ExpiresAt.Format(time.RFC3339Nano)), nil
}

func (a *applier) expire(c *evctx, p *api.Proposal) (api.HistoryEntry, error) {
	switch {
	case c.d.Env.From != ledger.LedgerSender:
		h := a.entryFor(c, api.EffectInvalid, fmt.Sprintf("ledger/expire is written only by %q", ledger.LedgerSender))
		h.Code = CodeBadExpiry
		return h, nil
	case p.ExpiresAt == nil:
		h := a.entryFor(c, api.EffectInvalid, "the proposal has no deadline")
		h.Code = CodeBadExpiry
		return h, nil
	case c.ev.Time.Before(*p.ExpiresAt):
		h := a.entryFor(c, api.EffectInvalid, fmt.Sprintf("appended before the deadline %s", p.ExpiresAt.Format(time.RFC3339Nano)))
		h.Code = CodeBadExpiry
		return h, nil
	case p.State == api.StatePending:
		if err := a.decide(c, p, api.StateExpired, "deadline"); err != nil {
			return api.HistoryEntry{}, err
		}
		return a.entryFor(c, api.EffectApplied, ""), nil
	case p.State == api.StateExpired && p.DecidedEvent == "":
		// Expired at its deadline by an earlier event; this records it.
		p.DecidedEvent, p.DecidedSeq = c.d.Env.ID, c.ev.Seq
		return a.entryFor(c, api.EffectRecorded, "records the expiry that took effect at the deadline"), nil
	default:
		return a.entryFor(c, api.EffectLate, "proposal already "+string(p.State)), nil
	}
}

func (a *applier) withdraw(c *evctx, p *api.Proposal) (api.HistoryEntry, error) {
	d := c.d
	if d.Env.From != p.Proposer {
		h := a.entryFor(c, api.EffectUnauthorized, fmt.Sprintf("only the proposer %q may withdraw", p.Proposer))
		h.Anomalies = []string{api.AnomalyUnauthorizedWithdraw}
		return h, nil
	}
	if p.State != api.StatePending {
		return a.entryFor(c, api.EffectLate, "proposal already "+string(p.State)), nil
	}
	if err := a.decide(c, p, api.StateWithdrawn, d.Reason); err != nil {
		return api.HistoryEntry{}, err
	}
	p.Withdrawal = &api.Withdrawal{Event: d.Env.ID, Seq: c.ev.Seq, From: d.Env.From, Reason: d.Reason}
	s, err := a.statsFor(c.space)
	if err != nil {
		return api.HistoryEntry{}, err
	}
	s.WithdrawalReasons[ReasonBucket(d.Reason)]++
	return a.entryFor(c, api.EffectApplied, ""), nil
}

func (a *applier) reject(c *evctx, p *api.Proposal) (api.HistoryEntry, error) {
	d := c.d
	r := api.Rejection{Event: d.Env.ID, Seq: c.ev.Seq, From: d.Env.From, Reason: d.Reason}
	var h api.HistoryEntry
	switch p.State {
	case api.StatePending:
		if err := a.decide(c, p, api.StateRejected, d.Reason); err != nil {
			return api.HistoryEntry{}, err
		}
		s, err := a.statsFor(c.space)
		if err != nil {
			return api.HistoryEntry{}, err
		}
		s.RejectionReasons[ReasonBucket(d.Reason)]++
		h = a.entryFor(c, api.EffectApplied, "")
	case api.StateRejected:
		h = a.entryFor(c, api.EffectRecorded, "proposal already rejected")
	default:
		r.Late = true
		h = a.entryFor(c, api.EffectLate, "proposal already "+string(p.State))
	}
	p.Rejections = append(p.Rejections, r)
	return h, nil
}

// fulfilmentChecks returns the never-blocking anomalies of contract §5.3 and §12.
//
// A kernel proposal's Method is "kernel/<action_type>" and its Params its
// parameters, so its fulfilment is compared like any other: the mcp/request
// that fulfils it is expected to carry {"method":"kernel/<action_type>",
// "params":<parameters>}; anything else is fulfillment_mismatch (the ledger
// cannot tell that some other call did what the typed proposal asked).
// unapproved_fulfillment: the proposal's approval class was not satisfied
// when the fulfilment was folded. fulfilled_before_window: its stream time
// is before time_window.valid_from_ms (a fulfilment at or after
// valid_until_ms finds the proposal expired: fulfilled_after_expired).
func fulfilmentChecks(c *evctx, p *api.Proposal) []string {
	d := c.d
	var an []string
	if d.Method != p.Method || !canon.Equal(nullIfEmpty(d.Params), nullIfEmpty(p.Params)) {
		an = append(an, api.AnomalyFulfillmentMismatch)
	}
	switch {
	case len(p.To) > 0:
		if !sameSet(p.To, d.Env.To) {
			an = append(an, api.AnomalyTargetMismatch)
		}
	case len(p.Targets) > 0:
		// Targets only from the seeds' fields: the fulfilment must come
		// from one of them or name one in its to.
		if !honoursTargets(p, d) {
			an = append(an, api.AnomalyTargetMismatch)
		}
	}
	if x := p.Exclusive; x != nil && !honoursTargets(p, d) &&
		(!x.FallbackToBroadcast || x.Until == nil || c.ev.Time.Before(*x.Until)) {
		an = append(an, api.AnomalyExclusiveViolation)
	}
	if d.Env.From == p.Proposer {
		an = append(an, api.AnomalySelfFulfilled)
	}
	if p.Approved != nil && !*p.Approved {
		an = append(an, api.AnomalyUnapprovedFulfillment)
	}
	if p.Kernel != nil && p.Kernel.ValidFromMs > 0 && c.ev.Time.UnixMilli() < p.Kernel.ValidFromMs {
		an = append(an, api.AnomalyFulfilledBeforeWindow)
	}
	return an
}

// honoursTargets reports whether fulfilment d honours p's targeting: its
// from is a target, or its to names one.
func honoursTargets(p *api.Proposal, d *ledger.Decoded) bool {
	for _, t := range p.Targets {
		if t.ID == d.Env.From || slices.Contains(d.Env.To, t.ID) {
			return true
		}
	}
	return false
}

// targetsOf merges a proposal's target sources by id, in order of first
// appearance.
func targetsOf(srcs []ledger.TargetSource) []api.Target {
	if len(srcs) == 0 {
		return nil
	}
	out := make([]api.Target, 0, len(srcs))
	for _, s := range srcs {
		i := slices.IndexFunc(out, func(t api.Target) bool { return t.ID == s.ID })
		if i < 0 {
			out = append(out, api.Target{ID: s.ID, Sources: sourceList(s.Source)})
		} else if !slices.Contains(out[i].Sources, s.Source) {
			out[i].Sources = append(slices.Clip(out[i].Sources), s.Source)
		}
	}
	return out
}

// singleSources are the one-element source lists, shared by every target
// named by one field (most are named by to alone); clipped, so that an
// append copies.
var singleSources = func() map[string][]string {
	m := map[string][]string{}
	for _, s := range []string{ledger.SourceTo, ledger.SourceFulfiller, ledger.SourcePreferred, ledger.SourcePreferredParticipant,
		ledger.SourcePreferredFulfillers, ledger.SourceTargetingPreferred} {
		m[s] = []string{s}[:1:1]
	}
	return m
}()

func sourceList(source string) []string {
	if l, ok := singleSources[source]; ok {
		return l
	}
	return []string{source}
}

func nullIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func (a *applier) fulfil(c *evctx, p *api.Proposal) (api.HistoryEntry, error) {
	d := c.d
	f := api.Fulfillment{Event: d.Env.ID, Seq: c.ev.Seq, From: d.Env.From, To: slices.Clip(d.Env.To)} // never changed: shared with the decoded event
	an := fulfilmentChecks(c, p)
	var h api.HistoryEntry
	switch p.State {
	case api.StatePending:
		if err := a.decide(c, p, api.StateFulfilled, ""); err != nil {
			return api.HistoryEntry{}, err
		}
		h = a.entryFor(c, api.EffectApplied, "")
	case api.StateFulfilled:
		an = append(an, api.AnomalyMultipleFulfillments)
		h = a.entryFor(c, api.EffectRecorded, "proposal already fulfilled by "+p.DecidedEvent)
	default:
		f.Late = true
		an = append(an, "fulfilled_after_"+string(p.State))
		h = a.entryFor(c, api.EffectLate, "proposal already "+string(p.State)+"; the operation ran anyway")
	}
	f.Anomalies = an
	h.Anomalies = an
	p.Fulfillments = append(p.Fulfillments, f)
	return h, nil
}

// approve folds a kernel/approve (contract §12). On a proposal without an
// approval class (not a kernel proposal) it is only recorded in the history
// (late after a terminal state).
// On a kernel proposal it is always kept in Approvals; it counts when the
// proposal is pending, the class needs approvals, the approver is not the
// proposer, is listed when the proposal lists approvers (always for
// threshold), and has not already been counted. A counted approval is
// applied and Approved turns true once Counted reaches Required; one that
// does not count is recorded (late after a terminal state), with Why.
func (a *applier) approve(c *evctx, p *api.Proposal) (api.HistoryEntry, error) {
	d := c.d
	if p.Kernel == nil {
		if p.State != api.StatePending {
			return a.entryFor(c, api.EffectLate, "proposal already "+string(p.State)+"; it has no approval class (not a kernel proposal)"), nil
		}
		return a.entryFor(c, api.EffectRecorded, "the proposal has no approval class (not a kernel proposal)"), nil
	}
	k := p.Kernel
	ap := api.Approval{Event: d.Env.ID, Seq: c.ev.Seq, From: d.Env.From, Reason: d.Reason}
	first := slices.IndexFunc(p.Approvals, func(x api.Approval) bool { return x.Counted && x.From == d.Env.From })
	switch {
	case p.State != api.StatePending:
		ap.Late, ap.Why = true, "proposal already "+string(p.State)
	case k.Required == 0:
		ap.Why = "approval class " + string(k.ApprovalClass) + " needs no approval"
	case d.Env.From == p.Proposer:
		ap.Why = "self-approval does not count"
	case len(k.Approvers) > 0 && !slices.Contains(k.Approvers, d.Env.From):
		ap.Why = "not a listed approver"
	case first >= 0:
		ap.Why = "already approved by " + d.Env.From + " (" + p.Approvals[first].Event + ")"
	default:
		ap.Counted = true
	}
	p.Approvals = append(p.Approvals, ap)
	switch {
	case ap.Late:
		return a.entryFor(c, api.EffectLate, ap.Why), nil
	case !ap.Counted:
		return a.entryFor(c, api.EffectRecorded, ap.Why), nil
	}
	k.Counted++
	detail := fmt.Sprintf("%d of %d approvals", k.Counted, k.Required)
	if k.Counted >= k.Required && (p.Approved == nil || !*p.Approved) {
		t := true
		p.Approved = &t
		detail += "; approved"
	}
	return a.entryFor(c, api.EffectApplied, detail), nil
}

// response records a fulfilment's outcome (contract §5.4).
func (a *applier) response(c *evctx, target string) error {
	ref, err := a.st.EventRef(c.space, target)
	if err != nil {
		return err
	}
	if ref == nil {
		return a.orphan(c, target, fmt.Sprintf("waiting for fulfilment %q", target))
	}
	if ref.Type != ledger.TypeFulfil {
		h := a.entryFor(c, api.EffectIgnored, fmt.Sprintf("%q is not a fulfilment (its type is %s)", target, ref.Type))
		h.Target = target
		return a.file(c.space, firstOr(ref.Proposals, target), h)
	}
	if ref.Status != EventApplied || len(ref.Proposals) == 0 {
		return a.orphan(c, target, fmt.Sprintf("waiting for fulfilment %q to be applied", target))
	}
	p, err := a.st.Proposal(c.space, ref.Proposals[0])
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("projections: proposal %q of event %q missing", ref.Proposals[0], target)
	}
	p = p.Clone()
	h := a.entryFor(c, api.EffectRecorded, "")
	h.Target, h.Outcome = target, c.d.Outcome
	i := slices.IndexFunc(p.Fulfillments, func(f api.Fulfillment) bool { return f.Event == target })
	if i < 0 {
		return fmt.Errorf("projections: fulfilment %q missing from proposal %q", target, p.ID)
	}
	f := &p.Fulfillments[i]
	f.Responses = append(slices.Clip(f.Responses), api.Response{Event: c.d.Env.ID, Seq: c.ev.Seq, From: c.d.Env.From, Outcome: c.d.Outcome})
	prev := f.Response
	j, why := pickOutcome(f, p.Proposer)
	if j >= 0 {
		f.Outcome, f.Response = f.Responses[j].Outcome, f.Responses[j].Event
	}
	switch {
	case c.d.Outcome == "":
		h.Detail = "response has neither result nor error"
	case j == len(f.Responses)-1:
		h.Effect = api.EffectApplied
		if prev != "" {
			h.Detail = why + "; replaces the outcome of " + prev
		}
	default:
		h.Detail = "outcome stays from " + f.Response + " (" + why + ")"
	}
	return a.commitTo(c, p, h)
}

// pickOutcome chooses, among the responses to fulfilment f that carry an
// outcome, the one whose outcome is the fulfilment's (contract §5.4): the first
// from a member of the fulfilment's to; when its to is empty, the first
// from a participant other than the fulfiller and the proposer; failing
// both, the first. It returns its index in f.Responses (-1 when none has an
// outcome) and which rule chose it.
func pickOutcome(f *api.Fulfillment, proposer string) (int, string) {
	first := -1
	for i, r := range f.Responses {
		if r.Outcome == "" {
			continue
		}
		if first < 0 {
			first = i
		}
		if len(f.To) > 0 {
			if slices.Contains(f.To, r.From) {
				return i, "first response from a member of the fulfilment's to"
			}
		} else if r.From != f.From && r.From != proposer {
			return i, "first response from a participant other than the fulfiller and the proposer"
		}
	}
	return first, "first response"
}

func firstOr(xs []string, def string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return def
}

// note attaches a chat to what it names (contract §5.5): the explanation of a
// rejection or withdrawal by the same sender, or a note in a proposal's
// history.
func (a *applier) note(c *evctx, target string) error {
	p, err := a.st.Proposal(c.space, target)
	if err != nil {
		return err
	}
	if p != nil {
		if c.d.Note != nil {
			return a.formNote(c, p.Clone())
		}
		h := a.entryFor(c, api.EffectRecorded, "note")
		h.Text = c.d.Text
		return a.commitTo(c, p.Clone(), h)
	}
	ref, err := a.st.EventRef(c.space, target)
	if err != nil {
		return err
	}
	if ref == nil {
		return a.orphan(c, target, fmt.Sprintf("waiting for %q", target))
	}
	if ref.Status == EventIgnored || ref.Status == EventInvalid || ref.Status == EventRecorded {
		h := a.entryFor(c, api.EffectIgnored, fmt.Sprintf("%q is not part of a proposal's life", target))
		h.Target = target
		return a.file(c.space, target, h)
	}
	if len(ref.Proposals) == 0 {
		return a.orphan(c, target, fmt.Sprintf("waiting for %q to be applied", target))
	}
	// A batch withdrawal or rejection explained once is explained on every
	// proposal it was applied to.
	for _, pid := range ref.Proposals {
		if err := a.noteOn(c, ref, target, pid); err != nil {
			return err
		}
	}
	return nil
}

// noteKindBucket is the statistics key of a note kind: itself when the
// seeds name it, "other" for anything else.
func noteKindBucket(kind string) string {
	switch kind {
	case ledger.NoteStatus, ledger.NoteAccept, ledger.NoteDefer, ledger.NoteBid:
		return kind
	}
	if slices.Contains(ledger.LifecycleOperations, kind) {
		return kind
	}
	return "other"
}

// formNote folds a note of the seeds' lifecycle forms on proposal p (contract
// §2): a status (the participant's latest, while p is pending), an
// acceptance, deferral or bid (kept on p whatever its effect, late after a
// terminal state), or any other operation or status value, kept as given
// in the history and never refused.
func (a *applier) formNote(c *evctx, p *api.Proposal) error {
	d, n := c.d, c.d.Note
	s, err := a.statsFor(c.space)
	if err != nil {
		return err
	}
	s.NoteKinds[noteKindBucket(n.Kind)]++
	late := p.State != api.StatePending
	h := a.entryFor(c, api.EffectApplied, "")
	fn := api.FormNote{Event: d.Env.ID, Seq: c.ev.Seq, From: d.Env.From, Form: d.Form, Reason: d.Reason,
		Confidence: n.Confidence, EstimatedTime: n.EstimatedTime, Late: late}
	switch n.Kind {
	case ledger.NoteStatus:
		switch {
		case !slices.Contains(ledger.Statuses, n.Status):
			h.Effect, h.Detail = api.EffectRecorded, fmt.Sprintf("status %q kept as given (not one of %s)", n.Status, strings.Join(ledger.Statuses, ", "))
		case late:
			h.Effect, h.Detail = api.EffectLate, "proposal already "+string(p.State)+"; statuses are kept while pending"
		default:
			st := api.ParticipantStatus{From: d.Env.From, Status: n.Status, Event: d.Env.ID, Seq: c.ev.Seq}
			if i := slices.IndexFunc(p.Statuses, func(x api.ParticipantStatus) bool { return x.From == st.From }); i >= 0 {
				h.Detail = fmt.Sprintf("%s: %s → %s", st.From, p.Statuses[i].Status, st.Status)
				p.Statuses[i] = st
			} else {
				h.Detail = fmt.Sprintf("%s: %s", st.From, st.Status)
				p.Statuses = append(p.Statuses, st)
			}
		}
	case ledger.NoteAccept:
		p.Acceptances = append(p.Acceptances, fn)
	case ledger.NoteDefer:
		p.Deferrals = append(p.Deferrals, fn)
	case ledger.NoteBid:
		p.Bids = append(p.Bids, fn)
	default:
		h.Effect, h.Detail = api.EffectRecorded, fmt.Sprintf("%s %q kept as a note", noteWhat(d), n.Kind)
	}
	if late && h.Effect == api.EffectApplied {
		h.Effect, h.Detail = api.EffectLate, "proposal already "+string(p.State)
	}
	return a.commitTo(c, p, h)
}

// noteWhat names what a note's kind is for a person.
func noteWhat(d *ledger.Decoded) string {
	if d.Env.Kind == ledger.KindMEUPLifecycle {
		return "operation"
	}
	return "status"
}

// noteOn applies note c, naming event target (indexed as ref), to proposal pid.
func (a *applier) noteOn(c *evctx, ref *EventRef, target, pid string) error {
	p, err := a.st.Proposal(c.space, pid)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("projections: proposal %q of event %q missing", pid, target)
	}
	p = p.Clone()
	h := a.entryFor(c, api.EffectRecorded, "note")
	h.Target, h.Text = target, c.d.Text
	from := c.d.Env.From
	switch ref.Type {
	case ledger.TypeReject:
		i := slices.IndexFunc(p.Rejections, func(r api.Rejection) bool { return r.Event == target })
		if i >= 0 && p.Rejections[i].From == from && p.Rejections[i].Explanation == "" {
			p.Rejections[i].Explanation = c.d.Text
			h.Effect, h.Detail = api.EffectApplied, "explains rejection "+target
		} else if i >= 0 {
			h.Detail = "note on rejection " + target + " (not its explanation: other sender or already explained)"
		}
	case ledger.TypeWithdraw:
		if w := p.Withdrawal; w != nil && w.Event == target && w.From == from && w.Explanation == "" {
			w.Explanation = c.d.Text
			h.Effect, h.Detail = api.EffectApplied, "explains withdrawal "+target
		} else {
			h.Detail = "note on withdrawal " + target
		}
	}
	return a.commitTo(c, p, h)
}

// released is an orphan released for folding, with its space.
type released struct {
	space string
	o     Orphan
}

// orphanHeap orders released orphans by sequence, then target.
type orphanHeap []released

func (h orphanHeap) Len() int { return len(h) }
func (h orphanHeap) Less(i, j int) bool {
	if h[i].o.Seq != h[j].o.Seq {
		return h[i].o.Seq < h[j].o.Seq
	}
	return h[i].o.Target < h[j].o.Target
}
func (h orphanHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *orphanHeap) Push(x any)   { *h = append(*h, x.(released)) }
func (h *orphanHeap) Pop() any {
	old := *h
	o := old[len(old)-1]
	*h = old[:len(old)-1]
	return o
}
