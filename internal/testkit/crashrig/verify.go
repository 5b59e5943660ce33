package crashrig

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/markkey"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// Report is what Verify found in a stopped ledger's data directory. Every
// list holds at most maxExamples examples; the counts are exact.
type Report struct {
	// The stream.
	Msgs, FirstSeq, LastSeq uint64
	// Acked is the number of acknowledged envelopes checked.
	Acked int
	// Missing are acknowledged envelopes not in the stream; Doubles
	// envelopes stored more than once; Moved envelopes stored at another
	// sequence than their acknowledgement named; Unacked envelopes stored
	// but never acknowledged.
	Missing, Doubles, Moved, Unacked       []string
	MissingN, DoublesN, MovedN, UnackedN   int
	Undecodable                            int
	Checkpoint                             uint64
	RebuildDiff                            string // "" when the projection equals a rebuild
	StatsEvents, Duplicates                int64
	Proposals, HistoryEntries, OrphanLists int
	EventsMismatch, OrphanTargetExists     []string
	EventsMismatchN, OrphanTargetExistsN   int
	StreamRead, RebuildTook, CompareTook   time.Duration
	UnknownKeys                            int
	// TreeHashes is the number of the Merkle tree's stored hashes in the
	// projection: tlog.StoredHashCount(Checkpoint) when the tree is
	// exactly as far as the projection (contract §16).
	TreeHashes int64
}

const maxExamples = 20

func note(list *[]string, n *int, s string) {
	*n++
	if len(*list) < maxExamples {
		*list = append(*list, s)
	}
}

// Verify checks a stopped `ledger serve` data directory: it starts a NATS
// server on <data>/nats (the embedded server's store), reads the whole
// LEDGER stream, checks every acknowledged envelope (id → seq) is in it
// exactly once at that sequence, opens <data>/projection and compares it
// with a rebuild of the stream into a fresh store under tmp, and checks the
// projection's counts: stats count every message once and none as a
// duplicate, every proposal's events equal its history entries, no orphan
// waits for a proposal that exists or an event that was applied.
func Verify(ctx context.Context, data, tmp string, acked map[string]uint64, log zerolog.Logger) (*Report, error) {
	rep := &Report{Acked: len(acked)}
	ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: filepath.Join(data, "nats"), Port: natsserver.RandomPort, Logger: log})
	if err != nil {
		return nil, err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	rep.Msgs, rep.FirstSeq, rep.LastSeq = info.State.Msgs, info.State.FirstSeq, info.State.LastSeq

	// The stream, against the acknowledgements.
	t0 := time.Now()
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(2000))
	if err != nil {
		return nil, err
	}
	storedAt := make(map[string]uint64, info.State.Msgs)
	for n := uint64(0); n < info.State.Msgs; n++ {
		m, err := it.Next()
		if err != nil {
			it.Stop()
			return nil, fmt.Errorf("read stream after %d messages: %w", n, err)
		}
		md, err := m.Metadata()
		if err != nil {
			it.Stop()
			return nil, err
		}
		d, err := ledger.Decode(m.Data(), ledger.DecodeOptions{Now: md.Timestamp})
		if err != nil {
			rep.Undecodable++
			continue
		}
		if prev, ok := storedAt[d.Env.ID]; ok {
			note(&rep.Doubles, &rep.DoublesN, fmt.Sprintf("%q at seq %d and %d", d.Env.ID, prev, md.Sequence.Stream))
			continue
		}
		storedAt[d.Env.ID] = md.Sequence.Stream
	}
	it.Stop()
	rep.StreamRead = time.Since(t0)
	for id, seq := range acked {
		got, ok := storedAt[id]
		switch {
		case !ok:
			note(&rep.Missing, &rep.MissingN, fmt.Sprintf("%q (acknowledged at seq %d)", id, seq))
		case got != seq:
			note(&rep.Moved, &rep.MovedN, fmt.Sprintf("%q acknowledged at seq %d, stored at %d", id, seq, got))
		}
	}
	for id, seq := range storedAt {
		if _, ok := acked[id]; !ok {
			note(&rep.Unacked, &rep.UnackedN, fmt.Sprintf("%q at seq %d", id, seq))
		}
	}

	// The projection, against a rebuild.
	live, err := projections.OpenStore(projections.StoreOptions{Dir: filepath.Join(data, "projection")})
	if err != nil {
		return nil, err
	}
	defer live.Close()
	rep.Checkpoint = live.AppliedSeq()
	fresh, err := projections.OpenStore(projections.StoreOptions{Dir: filepath.Join(tmp, "rebuild")})
	if err != nil {
		return nil, err
	}
	defer fresh.Close()
	// The rebuild folds with the ledger's mark keys, as `ledger rebuild`.
	folder := fold.NewFolder()
	if mk, err := markkey.Load(markkey.Path(data)); err == nil {
		folder.MarkKeys = mk
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	t0 = time.Now()
	if _, err := projector.Rebuild(ctx, js, fresh, projector.RebuildOptions{Folder: folder}); err != nil {
		return nil, err
	}
	rep.RebuildTook = time.Since(t0)
	t0 = time.Now()
	d, err := projections.Compare(live, fresh)
	if err != nil {
		return nil, err
	}
	if d != nil {
		rep.RebuildDiff = d.String()
	}
	rep.CompareTook = time.Since(t0)
	if err := counts(live, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// counts fills the projection's counts from one pass over its dump.
func counts(s *projections.Store, rep *Report) error {
	var dump bytes.Buffer
	if err := s.Dump(&dump); err != nil {
		return err
	}
	type sk struct{ space, id string }
	events := map[sk]int{}
	history := map[sk]int{}
	refs := map[sk]fold.EventStatus{}
	var orphans []sk
	var spaces []string
	sc := bufio.NewScanner(&dump)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		k, v, err := splitDumpLine(sc.Text())
		if err != nil {
			return err
		}
		ki := projections.DecodeKey([]byte(k))
		key := sk{ki.Space, ki.ID}
		switch ki.Table {
		case api.TableProposal:
			var p struct {
				Events int `json:"events"`
			}
			if err := json.Unmarshal([]byte(v), &p); err != nil {
				return fmt.Errorf("%s: %w", ki, err)
			}
			events[key] = p.Events
		case api.TableHistory:
			history[key]++
		case api.TableEventRef:
			var r struct {
				Status fold.EventStatus `json:"status"`
			}
			if err := json.Unmarshal(projections.StoredJSON([]byte(k), []byte(v)), &r); err != nil {
				return fmt.Errorf("%s: %w", ki, err)
			}
			refs[key] = r.Status
		case api.TableOrphans:
			orphans = append(orphans, key)
		case api.TableStats:
			spaces = append(spaces, ki.Space)
		case projections.TableTree:
			rep.TreeHashes++
		case api.TableUnknown:
			rep.UnknownKeys++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, sp := range spaces {
		st, err := s.Stats(sp)
		if err != nil {
			return err
		}
		rep.StatsEvents += st.Events
		rep.Duplicates += st.Effects[string(api.EffectDuplicate)]
	}
	rep.Proposals, rep.OrphanLists = len(events), len(orphans)
	for key, n := range events {
		if history[key] != n {
			note(&rep.EventsMismatch, &rep.EventsMismatchN, fmt.Sprintf("%q: events %d, history %d", key.id, n, history[key]))
		}
	}
	for _, n := range history {
		rep.HistoryEntries += n
	}
	for _, o := range orphans {
		if _, ok := events[o]; ok {
			note(&rep.OrphanTargetExists, &rep.OrphanTargetExistsN, fmt.Sprintf("orphans wait for proposal %q", o.id))
		} else if st, ok := refs[o]; ok && st != fold.EventOrphan {
			note(&rep.OrphanTargetExists, &rep.OrphanTargetExistsN, fmt.Sprintf("orphans wait for %q, an event that is %s", o.id, st))
		}
	}
	return nil
}

// splitDumpLine splits a Store.Dump line: two Go-quoted strings.
func splitDumpLine(line string) (string, string, error) {
	q, err := strconv.QuotedPrefix(line)
	if err != nil {
		return "", "", fmt.Errorf("dump line %q: %w", line, err)
	}
	k, _ := strconv.Unquote(q)
	rest := strings.TrimPrefix(line[len(q):], " ")
	v, err := strconv.Unquote(rest)
	if err != nil {
		return "", "", fmt.Errorf("dump value %q: %w", rest, err)
	}
	return k, v, nil
}

// WriteAcked writes acknowledgements as "seq id" lines (ids are JSON
// strings, so any id fits on a line).
func WriteAcked(path string, acked map[string]uint64) error {
	var b bytes.Buffer
	for id, seq := range acked {
		q, _ := json.Marshal(id)
		fmt.Fprintf(&b, "%d %s\n", seq, q)
	}
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// ReadAcked reads what WriteAcked wrote.
func ReadAcked(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		seqS, idJSON, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, errors.New("crashrig: bad acked line")
		}
		seq, err := strconv.ParseUint(seqS, 10, 64)
		if err != nil {
			return nil, err
		}
		var id string
		if err := json.Unmarshal([]byte(idJSON), &id); err != nil {
			return nil, err
		}
		out[id] = seq
	}
	return out, sc.Err()
}
