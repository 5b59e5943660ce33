package proofs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api/evidence"
)

// The witnessed side of the checkpoint log: the witnesses' cosignatures
// are added to the stored notes (AddCosignatures), and the latest
// checkpoint holding a quorum of them is kept under its own key
// (SetWitnessed), so that GET /v1/checkpoint serves it after a restart.

// 'w' → u64 tree size of the latest checkpoint holding the witnesses'
// quorum.
var keyWitnessed = []byte{'w'}

// AddCosignatures adds signature lines (a witness's answer) to the stored
// checkpoint of size, keeping those it carries (evidence.AddSignatures),
// durably, and returns the note as stored. ErrNotFound when there is no
// checkpoint of that size.
func (l *Log) AddCosignatures(size int64, sigs []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	v, closer, err := l.db.Get(logKey(size))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("%w: no checkpoint of tree size %d", ErrNotFound, size)
	}
	if err != nil {
		return nil, fmt.Errorf("proofs: checkpoint %d: %w", size, err)
	}
	note, err := evidence.AddSignatures(v, sigs)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("proofs: cosign checkpoint %d: %w", size, err)
	}
	if err := l.db.Set(logKey(size), note, pebble.Sync); err != nil {
		return nil, fmt.Errorf("proofs: store checkpoint %d: %w", size, err)
	}
	if l.latest != nil && l.latest.Checkpoint.Size == size {
		l.latest.Note = note
	}
	if l.witnessed != nil && l.witnessed.Checkpoint.Size == size {
		l.witnessed.Note = note
	}
	return note, nil
}

// SetWitnessed records the checkpoint of size as the latest holding the
// witnesses' quorum (durably), when it is larger than the one recorded.
func (l *Log) SetWitnessed(size int64) error {
	e, ok, err := l.At(size)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no checkpoint of tree size %d", ErrNotFound, size)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.witnessed != nil && l.witnessed.Checkpoint.Size >= size {
		return nil
	}
	if err := l.db.Set(keyWitnessed, binary.BigEndian.AppendUint64(nil, uint64(size)), pebble.Sync); err != nil {
		return fmt.Errorf("proofs: store witnessed checkpoint %d: %w", size, err)
	}
	l.witnessed = &e
	close(l.witnessedChanged)
	l.witnessedChanged = make(chan struct{})
	return nil
}

// Witnessed returns the latest checkpoint recorded as holding the
// witnesses' quorum, false when none.
func (l *Log) Witnessed() (Entry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.witnessed == nil {
		return Entry{}, false
	}
	return *l.witnessed, true
}

// WitnessedChanged returns a channel closed when the witnessed checkpoint
// changes after the call.
func (l *Log) WitnessedChanged() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.witnessedChanged
}

// ClearWitnessed forgets the witnessed checkpoint (the witnesses or the
// quorum changed: what held the old quorum may not hold the new one).
func (l *Log) ClearWitnessed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.db.Delete(keyWitnessed, pebble.Sync); err != nil {
		return fmt.Errorf("proofs: clear witnessed checkpoint: %w", err)
	}
	l.witnessed = nil
	close(l.witnessedChanged)
	l.witnessedChanged = make(chan struct{})
	return nil
}

// loadWitnessed reads the witnessed checkpoint at open.
func (l *Log) loadWitnessed() error {
	v, closer, err := l.db.Get(keyWitnessed)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("proofs: checkpoint log: %w", err)
	}
	bad := len(v) != 8
	var size int64
	if !bad {
		size = int64(binary.BigEndian.Uint64(v))
	}
	closer.Close()
	if bad {
		return fmt.Errorf("proofs: checkpoint log: bad witnessed entry %x", v)
	}
	e, ok, err := l.at(size)
	if err != nil {
		return err
	}
	if ok {
		l.witnessed = &e
	}
	return nil
}

// UseWitnesses makes the service prefer witnessed checkpoints: Served and
// the proofs (CheckpointFor) use the latest checkpoint holding the
// witnesses' quorum. Called once, before serving.
func (s *Service) UseWitnesses() { s.witnesses.Store(true) }

// Witnessing reports whether UseWitnesses was called.
func (s *Service) Witnessing() bool { return s.witnesses.Load() }

// Served returns the checkpoint GET /v1/checkpoint serves: the latest
// witnessed one when the service uses witnesses (unless unwitnessed),
// else the latest signed; false when there is none.
func (s *Service) Served(unwitnessed bool) (Entry, bool) {
	if s.Witnessing() && !unwitnessed {
		return s.cps.Witnessed()
	}
	return s.cps.Latest()
}
