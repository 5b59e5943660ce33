package api

import "github.com/mewledger/ledger/api"

// pageHoleChanges returns the hole changes a GET /v1/changes page carries
// (contract §14 "Several recorders"): those of the space with a sequence
// in (f.after, through], in stream order — the window of the page's
// proposal changes, so paging by since_seq=through misses none and sends
// none twice, as /v1/watch merges them. None when the page follows one
// proposal or one state (the watch sends none then either).
func (a *API) pageHoleChanges(f *watchFilter, through uint64) ([]api.HoleChange, error) {
	hs := []api.HoleChange{}
	if !f.holes() || through <= f.after {
		return hs, nil
	}
	got, err := a.reader.HoleChanges(f.space, f.after, through)
	if err != nil {
		return nil, err
	}
	return append(hs, got...), nil
}
