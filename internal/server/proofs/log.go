package proofs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api/evidence"
)

// LogDir is the checkpoint log's directory in the data directory.
const LogDir = "checkpoints"

// Entry is one signed checkpoint of the log.
type Entry struct {
	// Checkpoint is the note's parsed body.
	Checkpoint evidence.Checkpoint
	// Note is the signed note, as signed (and published).
	Note []byte
}

// Log is the checkpoint log: every checkpoint the ledger signed, by tree
// size, in a Pebble store of its own. Safe for concurrent use; Close is
// safe twice.
type Log struct {
	db *pebble.DB

	mu      sync.RWMutex // guards closed, latest and changed; writers hold it
	closed  bool
	latest  *Entry
	changed chan struct{} // closed and replaced when latest changes

	witnessed        *Entry        // cosigned.go
	witnessedChanged chan struct{} // closed and replaced when witnessed changes
}

// ErrClosed is returned by a Log used after Close.
var ErrClosed = errors.New("proofs: checkpoint log closed")

// 'c' ‖ u64 tree size → signed note.
const tagCheckpoint = 'c'

func logKey(size int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagCheckpoint}, uint64(size))
}

// OpenLog opens (or creates) the checkpoint log in dir.
func OpenLog(dir string) (*Log, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("proofs: open checkpoint log %s: %w", dir, err)
	}
	l := &Log{db: db, changed: make(chan struct{}), witnessedChanged: make(chan struct{})}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagCheckpoint}, UpperBound: []byte{tagCheckpoint + 1}})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("proofs: checkpoint log: %w", err)
	}
	if it.Last() {
		e, err := decodeEntry(it.Key(), it.Value())
		if err != nil {
			_ = it.Close()
			_ = db.Close()
			return nil, err
		}
		l.latest = &e
	}
	if err := it.Close(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("proofs: checkpoint log: %w", err)
	}
	if err := l.loadWitnessed(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return l, nil
}

func decodeEntry(key, val []byte) (Entry, error) {
	cp, err := evidence.ParseUnverified(val)
	if err != nil || len(key) != 9 || int64(binary.BigEndian.Uint64(key[1:])) != cp.Size {
		return Entry{}, fmt.Errorf("proofs: checkpoint log: bad entry %x: %v", key, err)
	}
	return Entry{Checkpoint: cp, Note: bytes.Clone(val)}, nil
}

// Latest returns the checkpoint of the largest tree, false when none.
func (l *Log) Latest() (Entry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.latest == nil {
		return Entry{}, false
	}
	return *l.latest, true
}

// Changed returns a channel closed when the latest checkpoint changes
// after the call.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.changed
}

// At returns the checkpoint of size, false when there is none.
func (l *Log) At(size int64) (Entry, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Entry{}, false, ErrClosed
	}
	return l.at(size)
}

// at is At with l.mu held.
func (l *Log) at(size int64) (Entry, bool, error) {
	v, closer, err := l.db.Get(logKey(size))
	if errors.Is(err, pebble.ErrNotFound) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("proofs: checkpoint %d: %w", size, err)
	}
	defer closer.Close()
	e, err := decodeEntry(logKey(size), v)
	return e, err == nil, err
}

// List returns up to limit checkpoints of sizes ≥ from, smallest first,
// and whether there are more.
func (l *Log) List(from int64, limit int) ([]Entry, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, false, ErrClosed
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: logKey(max(from, 0)), UpperBound: []byte{tagCheckpoint + 1}})
	if err != nil {
		return nil, false, fmt.Errorf("proofs: list checkpoints: %w", err)
	}
	var out []Entry
	more := false
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == limit {
			more = true
			break
		}
		e, err := decodeEntry(it.Key(), it.Value())
		if err != nil {
			_ = it.Close()
			return nil, false, err
		}
		out = append(out, e)
	}
	if err := it.Close(); err != nil {
		return nil, false, fmt.Errorf("proofs: list checkpoints: %w", err)
	}
	return out, more, nil
}

// Add stores a signed checkpoint durably (pebble.Sync). A checkpoint of a
// size already stored is kept as it was (the first one signed wins: the
// same key signs the same text to the same note).
func (l *Log) Add(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	key := logKey(e.Checkpoint.Size)
	if _, closer, err := l.db.Get(key); err == nil {
		closer.Close()
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("proofs: checkpoint %d: %w", e.Checkpoint.Size, err)
	}
	if err := l.db.Set(key, e.Note, pebble.Sync); err != nil {
		return fmt.Errorf("proofs: store checkpoint %d: %w", e.Checkpoint.Size, err)
	}
	if l.latest == nil || e.Checkpoint.Size > l.latest.Checkpoint.Size {
		c := e
		l.latest = &c
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return nil
}

// Close closes the log; safe to call twice.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.db.Close()
}

// quietLogger drops Pebble's informational messages and panics on fatal
// ones, as Pebble's default does.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
