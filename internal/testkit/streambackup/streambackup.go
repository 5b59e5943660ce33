// Package streambackup takes a JetStream stream's snapshot and restores
// it through the server's own API ($JS.API.STREAM.SNAPSHOT and
// $JS.API.STREAM.RESTORE, what `nats stream backup` and `nats stream
// restore` use), for the tests of a ledger repaired from a backup while
// it serves (contract §16). Not for production code.
package streambackup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Snapshot is a stream's backup: its configuration, its state when taken
// and the server's snapshot archive.
type Snapshot struct {
	Config server.StreamConfig
	State  server.StreamState
	Data   []byte
}

// Take snapshots stream (without its consumers) over nc.
func Take(ctx context.Context, nc *nats.Conn, stream string) (*Snapshot, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("streambackup: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(server.JSApiStreamSnapshotRequest{DeliverSubject: inbox, NoConsumers: true, ChunkSize: 64 * 1024})
	msg, err := nc.RequestWithContext(ctx, fmt.Sprintf(server.JSApiStreamSnapshotT, stream), req)
	if err != nil {
		return nil, fmt.Errorf("streambackup: snapshot %s: %w", stream, err)
	}
	var resp server.JSApiStreamSnapshotResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("streambackup: snapshot %s: %w", stream, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("streambackup: snapshot %s: %s", stream, resp.Error.Description)
	}
	if resp.Config == nil || resp.State == nil {
		return nil, fmt.Errorf("streambackup: snapshot %s: no config or state in the answer", stream)
	}
	snap := &Snapshot{Config: *resp.Config, State: *resp.State}
	var buf bytes.Buffer
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("streambackup: snapshot %s: %w", stream, err)
		}
		if len(m.Data) == 0 {
			// The end: empty, with a status 204 or what went wrong (none
			// after a snapshot smaller than one chunk).
			if st := m.Header.Get("Status"); st != "" && st != "204" {
				return nil, fmt.Errorf("streambackup: snapshot %s: %s %s", stream, st, m.Header.Get("Description"))
			}
			break
		}
		buf.Write(m.Data)
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				return nil, fmt.Errorf("streambackup: snapshot %s: %w", stream, err)
			}
		}
	}
	snap.Data = buf.Bytes()
	return snap, nil
}

// Restore restores snap as its stream over nc; the stream must not exist
// (delete it first).
func Restore(ctx context.Context, nc *nats.Conn, snap *Snapshot) error {
	name := snap.Config.Name
	req, err := json.Marshal(server.JSApiStreamRestoreRequest{Config: snap.Config, State: snap.State})
	if err != nil {
		return fmt.Errorf("streambackup: restore %s: %w", name, err)
	}
	msg, err := nc.RequestWithContext(ctx, fmt.Sprintf(server.JSApiStreamRestoreT, name), req)
	if err != nil {
		return fmt.Errorf("streambackup: restore %s: %w", name, err)
	}
	var resp server.JSApiStreamRestoreResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("streambackup: restore %s: %w", name, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("streambackup: restore %s: %s", name, resp.Error.Description)
	}
	const chunk = 64 * 1024
	for data := snap.Data; len(data) > 0; {
		n := min(chunk, len(data))
		if _, err := nc.RequestWithContext(ctx, resp.DeliverSubject, data[:n]); err != nil {
			return fmt.Errorf("streambackup: restore %s: chunk: %w", name, err)
		}
		data = data[n:]
	}
	// The end: an empty message; the answer is the stream's.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	msg, err = nc.RequestWithContext(rctx, resp.DeliverSubject, nil)
	if err != nil {
		return fmt.Errorf("streambackup: restore %s: end: %w", name, err)
	}
	var done server.JSApiStreamCreateResponse
	if err := json.Unmarshal(msg.Data, &done); err != nil {
		return fmt.Errorf("streambackup: restore %s: %w", name, err)
	}
	if done.Error != nil {
		return fmt.Errorf("streambackup: restore %s: %w", name, errors.New(done.Error.Description))
	}
	return nil
}
