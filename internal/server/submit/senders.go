package submit

import (
	"fmt"
	"net/url"
	"strings"
)

// HeaderSenders on a batch request names, for each envelope in order, the
// sender to publish it under (ledger.BodyOptions.Sender; "" : the
// envelope's from): what a `ledger bridge mew --history` follower read in
// the gateway's log (contract §14), sent through the submit service so
// that its marks are sealed like every recorder's (ledger.HeaderBridgeSeal).
// Entries are query-escaped and separated by commas. The submit service
// is for trusted publishers only (gateways and bridges, contract §10),
// who may publish under any sender already; an envelope whose from
// differs folds invalid (spoofed_sender).
const HeaderSenders = "Ledger-Senders"

// EncodeSenders returns the HeaderSenders value of senders.
func EncodeSenders(senders []string) string {
	parts := make([]string, len(senders))
	for i, s := range senders {
		parts[i] = url.QueryEscape(s)
	}
	return strings.Join(parts, ",")
}

// parseSenders decodes a HeaderSenders value for n envelopes (nil when
// the header is absent).
func parseSenders(h string, n int) ([]string, error) {
	if h == "" {
		return nil, nil
	}
	parts := strings.Split(h, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("%s names %d senders for %d envelopes", HeaderSenders, len(parts), n)
	}
	for i, p := range parts {
		s, err := url.QueryUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", HeaderSenders, i+1, err)
		}
		parts[i] = s
	}
	return parts, nil
}
