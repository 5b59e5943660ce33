package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/proofs"
)

// paramFraming asks for an entry bundle in the ledger's long framing
// (evidence.FramingLong): GET /v1/tile/entries/N?framing=long.
const (
	paramFraming = "framing"
	framingLong  = "long"
)

// getEntryBundle answers a C2SP tlog-tiles entry bundle: the leaves
// (evidence.Leaf encoding) of indexes 256·N.. framed by a big-endian
// uint16 length, or a uint32 one with ?framing=long. Immutable once the
// tree holds the leaves, like the hash tiles.
func (a *API) getEntryBundle(w http.ResponseWriter, r *http.Request, path string) {
	q := r.URL.Query()
	if e := params(q, paramFraming); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	f := evidence.FramingC2SP
	switch q.Get(paramFraming) {
	case "":
	case framingLong:
		f = evidence.FramingLong
	default:
		writeError(w, http.StatusBadRequest, badParam(paramFraming, "framing must be %q or absent, not %q", framingLong, q.Get(paramFraming)))
		return
	}
	n, width, err := evidence.ParseEntriesPath(path)
	if err != nil {
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "path",
			Message: fmt.Sprintf("%q is not an entry bundle path (tile/entries/<N>[.p/<W>])", path)})
		return
	}
	var data []byte
	err = a.reader.withTree(func(tree proofs.Tree) error {
		var err error
		data, err = a.opts.Proofs.EntryBundle(r.Context(), tree, n, width, f)
		return err
	})
	if errors.Is(err, proofs.ErrEntryTooLong) {
		writeError(w, http.StatusConflict, &api.Error{Code: api.CodeEntryTooLong, Field: "path", Message: err.Error()})
		return
	}
	if err != nil {
		a.proofError(w, r, "path", err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(data)
}
