package projections

import (
	"encoding/json"
	"fmt"
)

// Superseded versions of reused event ids (contract §5.2):
//
//	'V' space id+"\x00"+digest → decimal seq
//
// written when a different event takes over an id in the event index, read
// only when an event's id is known with another digest (a reuse or the
// retry of a superseded event): never on the fold's common path. (The tag
// is in store_keys.go.)

func versionID(id, digest string) string { return id + "\x00" + digest }

// Version implements State.
func (b *Batch) Version(space, id, digest string) (uint64, error) {
	val, err := b.getAux(tagVersion, space, versionID(id, digest))
	if err != nil || val == nil {
		return 0, err
	}
	var n uint64
	if err := json.Unmarshal(val, &n); err != nil {
		return 0, fmt.Errorf("projections: batch: decode version of %q in space %q: %w", id, space, err)
	}
	return n, nil
}

// PutVersion implements State.
func (b *Batch) PutVersion(space, id, digest string, seq uint64) error {
	return b.putAux(tagVersion, space, versionID(id, digest), []byte(fmt.Sprint(seq)))
}
