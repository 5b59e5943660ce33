package api

// Key tables of the hole watch (projections/holes_watch.go).
const (
	TableHoles      = "holes"       // a MEW space's holes as of its last hole change
	TableHoleChange = "hole_change" // the hole change index
)

// HoleChange is one change of a MEW space's holes (contract §14 "Several
// recorders", §7 /v1/watch `event: holes`): at the arrival of the event
// at Seq, windows in which no recorder was recording opened (a hole
// appeared or grew) or healed (a recorder covered them, or a recorder
// came back and bounded an open hole). Opened are the parts of the holes
// now that were in no hole before, each with the recorders and gaps of the
// hole it lies in; Healed the parts of the holes before that are in no
// hole now, with those of the hole they lay in; Holes every hole of the
// MEW space now. The fold writes one at each arrival that changes which
// positions lie in a hole, and a rebuild writes the same.
type HoleChange struct {
	Seq      uint64 `json:"seq"`
	Space    string `json:"space"`
	MEWSpace string `json:"mew_space"`
	Opened   []Hole `json:"opened"`
	Healed   []Hole `json:"healed"`
	Holes    []Hole `json:"holes"`
}

// ChangesPage is the body of GET /v1/changes: the change index as a JSON
// page. Changes are the proposals' changes with a sequence in (since_seq,
// Through], in stream order; HoleChanges every change of a MEW space's
// holes in the same window, in stream order (what /v1/watch sends as
// `event: holes`; none when the page follows one proposal or one state).
// At one sequence the proposals' changes come before the hole change, as
// on the watch. More is false when every change up to the projection's
// checkpoint (Through) was read; the next page is since_seq=Through.
type ChangesPage struct {
	Changes     []Change     `json:"changes"`
	HoleChanges []HoleChange `json:"hole_changes"`
	Through     uint64       `json:"through"`
	More        bool         `json:"more"`
}
