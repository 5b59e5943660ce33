package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
	"github.com/mewledger/ledger/projections"
)

// Stored bytes are served bytes. The store holds each proposal in exactly
// the bytes the routes write for it (projections.ServedProposal: what
// writeJSON writes for normalize(p), without the newline), so
// GET /v1/proposals/{id} and the list route copy them instead of decoding
// and encoding each record (for a page of 100 that was 88% of the route's
// CPU). A reader that cannot hand out its records takes the decoding path,
// which writes the same bytes (TestListRouteSameBothWays).

// rawReader is a Reader that can return its stored records.
type rawReader interface {
	GetRaw(space, id string) (json.RawMessage, error)
	ListRaw(q projections.ListQuery) (projections.RawPage, error)
}

// errNoRaw is returned by swapReader's GetRaw and ListRaw when the reader in
// place cannot.
var errNoRaw = errors.New("api: reader has no stored records")

// getRaw answers GET /v1/proposals/{id} from the stored bytes; false when
// the reader has none (nothing written).
func (a *API) getRaw(w http.ResponseWriter, r *http.Request, rd Reader, space, id string) bool {
	rr, ok := rd.(rawReader)
	if !ok {
		return false
	}
	rec, err := rr.GetRaw(space, id)
	switch {
	case errors.Is(err, errNoRaw):
		return false
	case errors.Is(err, projections.ErrNotFound):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "id",
			Message: fmt.Sprintf("no proposal %q in space %q", id, space)})
	case err != nil:
		a.internal(w, r, err)
	default:
		writeBytes(w, append(rec, '\n'))
	}
	return true
}

// listRaw answers the list route from the stored bytes; false when the
// reader has none (nothing written).
func (a *API) listRaw(w http.ResponseWriter, r *http.Request, rd Reader, lq projections.ListQuery) bool {
	rr, ok := rd.(rawReader)
	if !ok {
		return false
	}
	page, err := rr.ListRaw(lq)
	switch {
	case errors.Is(err, errNoRaw):
		return false
	case errors.Is(err, projections.ErrBadQuery):
		writeListError(w, lq, err)
	case err != nil:
		a.internal(w, r, err)
	default:
		writeBytes(w, listBody(page))
	}
	return true
}

// listBody is what writeJSON writes for api.List{page}: the stored records
// copied.
func listBody(page projections.RawPage) []byte {
	n := 32 + len(page.NextCursor)
	for _, rec := range page.Proposals {
		n += len(rec) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"proposals":[`...)
	for i, rec := range page.Proposals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec...)
	}
	b = append(b, `],"next_cursor":`...)
	b = canon.AppendStringNoHTML(b, page.NextCursor)
	return append(b, '}', '\n')
}

// writeListError answers a list query the store refused. Every filter was
// checked before; what the store can still refuse is the cursor.
func writeListError(w http.ResponseWriter, lq projections.ListQuery, err error) {
	field := ""
	if lq.Cursor != "" {
		field = paramCursor
	}
	writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadQuery, Field: field, Message: err.Error()})
}

// writeBytes writes a 200 JSON body as writeJSON does.
func writeBytes(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // an error means the client went away: nothing to do
}
