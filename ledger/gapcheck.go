package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mewledger/ledger/api"
)

// ParseGap decodes a bridge's gap report (a Gap object; unknown members
// are refused) and checks it: a bridge name that is an id (1..MaxIDBytes
// bytes) other than LedgerSender, a disconnection time, and a
// reconnection time, when given, not before it, both within
// InUnixNanoRange (the gap id holds the time in Unix nanoseconds). The error is a
// *RefusalError naming the field. The HTTP API (POST /v1/gaps) and the
// submit service's gap endpoint (ledger.gap.<space>) use it before
// appending GapEnvelope with AppendSystem.
func ParseGap(body []byte) (Gap, error) {
	var g Gap
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, refuse(api.CodeNotJSON, "", "a gap report must be a gap object {\"bridge\",\"mew_space\",\"gateway\",\"last_envelope\",\"last_seq\",\"disconnected_at\",\"reconnected_at\",\"noticed_at\",\"reason\",\"session\",\"dropped\"}: %v", err)
	}
	if dec.More() {
		return g, refuse(api.CodeNotJSON, "", "a gap report holds one JSON object, not more")
	}
	switch {
	case g.Bridge == "":
		return g, refuse(api.CodeMissingField, "bridge", "bridge (the bridge's participant name) is required")
	case len(g.Bridge) > MaxIDBytes:
		return g, refuse(api.CodeTooLong, "bridge", "bridge is %d bytes, over the limit of %d", len(g.Bridge), MaxIDBytes)
	case g.Bridge == LedgerSender:
		return g, refuse(api.CodeBadValue, "bridge", "%q is the ledger's own sender, not a bridge", LedgerSender)
	case g.DisconnectedAt.IsZero():
		return g, refuse(api.CodeMissingField, "disconnected_at", "disconnected_at (RFC 3339) is required")
	case !InUnixNanoRange(g.DisconnectedAt):
		return g, refuse(api.CodeBadValue, "disconnected_at", "disconnected_at %s is out of range (1677-09-21 to 2262-04-11)", g.DisconnectedAt.Format(time.RFC3339))
	case !g.ReconnectedAt.IsZero() && !InUnixNanoRange(g.ReconnectedAt):
		return g, refuse(api.CodeBadValue, "reconnected_at", "reconnected_at %s is out of range (1677-09-21 to 2262-04-11)", g.ReconnectedAt.Format(time.RFC3339))
	case !g.ReconnectedAt.IsZero() && g.ReconnectedAt.Before(g.DisconnectedAt):
		return g, refuse(api.CodeBadValue, "reconnected_at", "reconnected_at is before disconnected_at")
	case g.Dropped < 0:
		return g, refuse(api.CodeBadValue, "dropped", "dropped is %d: want a count, 0 or more", g.Dropped)
	}
	if _, err := GapEnvelope(g); err != nil {
		return g, refuse(api.CodeBadValue, "", "%s", fmt.Sprint(err))
	}
	return g, nil
}
