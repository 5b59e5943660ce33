package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sync/errgroup"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
)

// maxBody bounds an answer the monitor reads: a full entry bundle in the
// long framing of 256 leaves of up to about 1 MiB each.
const maxBody = 512 << 20

// get fetches path (with its query) from the ledger. A non-200 answer is
// an *api.Error (the ledger's JSON error, or one made from the status).
func (m *Monitor) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.o.URL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	if m.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.o.Token)
	}
	resp, err := m.o.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("monitor: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("monitor: GET %s: %w", path, err)
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("monitor: GET %s: answer over %d bytes", path, maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		var body api.ErrorBody
		if json.Unmarshal(b, &body) != nil || body.Error == nil {
			body.Error = &api.Error{Code: strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_")), Message: strings.TrimSpace(string(b))}
		}
		body.Error.Status = resp.StatusCode
		return nil, fmt.Errorf("monitor: GET %s: %d %w", path, resp.StatusCode, body.Error)
	}
	return b, nil
}

// apiCode returns the code of the ledger's error err holds, "" for none.
func apiCode(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// damagedSeq returns the first damaged sequence the ledger's
// log_damaged answer names (0: none).
func damagedSeq(err error) uint64 {
	var e *api.Error
	if errors.As(err, &e) && e.Damage != nil {
		return e.Damage.Seq
	}
	return 0
}

// missingAnswer reports whether err is the ledger saying it does not have
// (or will not serve, its log being damaged) what its signed tree holds.
func missingAnswer(err error) bool {
	switch apiCode(err) {
	case api.CodeNotFound, api.CodeBeyondTree, api.CodeLogDamaged:
		return true
	}
	return false
}

// tileReader is a tlog.TileReader over the ledger's hash tiles. The first
// failure to fetch is kept (fetchErr), so that a caller tells a tile it
// could not get from one that does not hash to the signed root.
type tileReader struct {
	ctx      context.Context
	m        *Monitor
	fetchErr error
}

func (r *tileReader) Height() int { return evidence.TileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	g, ctx := errgroup.WithContext(r.ctx)
	g.SetLimit(r.m.o.Parallel)
	for i, t := range tiles {
		g.Go(func() error {
			b, err := r.m.get(ctx, "/v1/"+evidence.TilePath(t))
			out[i] = b
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if r.fetchErr == nil {
			r.fetchErr = err
		}
		return nil, err
	}
	return out, nil
}

func (r *tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// bundle fetches entry bundle n of width w and splits it, in the C2SP
// framing or, when the ledger answers entry_too_long, its long framing.
func (m *Monitor) bundle(ctx context.Context, n int64, w int) ([][]byte, error) {
	path := "/v1/" + evidence.EntriesPath(n, w)
	f := evidence.FramingC2SP
	b, err := m.get(ctx, path)
	if apiCode(err) == api.CodeEntryTooLong {
		f = evidence.FramingLong
		b, err = m.get(ctx, path+"?"+evidence.FramingLongParam)
	}
	if err != nil {
		return nil, err
	}
	leaves, err := evidence.SplitEntryBundle(b, f)
	if err != nil {
		return nil, &Finding{Kind: ErrAltered, Seq: uint64(n*evidence.EntryBundleWidth) + 1, Err: fmt.Errorf("entry bundle %s: %w", path, err)}
	}
	if len(leaves) != w {
		return nil, &Finding{Kind: ErrAltered, Seq: uint64(n*evidence.EntryBundleWidth+int64(min(len(leaves), w))) + 1,
			Err: fmt.Errorf("entry bundle %s holds %d entries, want %d", path, len(leaves), w)}
	}
	return leaves, nil
}
