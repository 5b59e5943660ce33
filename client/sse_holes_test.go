package client

import (
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

const sseHoles = "event: change\nid: 5\ndata: {\"seq\":5,\"space\":\"default\",\"id\":\"a\",\"state\":\"pending\",\"anomalies\":[]}\n\n" +
	"event: holes\nid: 7\ndata: {\"seq\":7,\"space\":\"default\",\"mew_space\":\"demo\",\"opened\":[{\"mew_space\":\"demo\",\"after\":{\"seq\":4},\"open\":true,\"recorders\":[\"a\",\"b\"],\"gaps\":[]}],\"healed\":[],\"holes\":[]}\n\n" +
	"event: change\nid: 8\ndata: {\"seq\":8,\"space\":\"default\",\"id\":\"b\",\"state\":\"pending\",\"anomalies\":[]}\n\n"

// TestReadSSEHoles: `event: holes` messages go to onHoles (never to fn as
// a change), and move the position like any other; without onHoles they
// are skipped.
func TestReadSSEHoles(t *testing.T) {
	last := "0"
	var got []string
	err := readSSEHoles(strings.NewReader(sseHoles), &last, func(c api.Change, _ []byte) error {
		got = append(got, c.ID+"@"+last)
		return nil
	}, func(hc api.HoleChange, _ []byte) error {
		got = append(got, "holes:"+hc.MEWSpace+"@"+last)
		if len(hc.Opened) != 1 || hc.Opened[0].After.Seq != 4 || !hc.Opened[0].Open {
			t.Errorf("hole change %+v", hc)
		}
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a@0,holes:demo@5,b@7" || last != "8" {
		t.Fatalf("%q last %q err %v", got, last, err)
	}
	got, last = nil, "0"
	if err := readSSE(strings.NewReader(sseHoles), &last, func(c api.Change, _ []byte) error {
		got = append(got, c.ID)
		return nil
	}); err != nil || strings.Join(got, ",") != "a,b" || last != "8" {
		t.Fatalf("without onHoles: %q last %q err %v", got, last, err)
	}
}
