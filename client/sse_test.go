package client

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

const sseSample = ": watching space \"default\" from seq 0\nretry: 2000\n\n" +
	"event: change\ndata: {\"seq\":6,\"space\":\"default\",\"id\":\"a\",\"state\":\"rejected\",\"anomalies\":[]}\n\n" +
	"event: change\nid: 6\ndata: {\"seq\":6,\"space\":\"default\",\"id\":\"b\",\"state\":\"rejected\",\"anomalies\":[]}\n\n" +
	": heartbeat\nid: 9\n\n" +
	"event: change\r\nid: 10\r\ndata:{\"seq\":10,\r\ndata: \"space\":\"default\",\"id\":\"c\",\"state\":\"pending\",\"anomalies\":[]}\r\n\r\n" +
	"id: 11\n" // an unfinished message: not dispatched

// TestReadSSE: changes in order, ids only where sent (a heartbeat's id
// moves the position too), multi-line data, CRLF, and an unfinished
// message at the end ignored; a callback's error stops the stream.
func TestReadSSE(t *testing.T) {
	last := "0"
	var got []string
	var lasts []string
	err := readSSE(strings.NewReader(sseSample), &last, func(c api.Change, raw []byte) error {
		got = append(got, c.ID)
		lasts = append(lasts, last)
		if !json.Valid(raw) {
			t.Errorf("raw %q", raw)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a,b,c" || strings.Join(lasts, ",") != "0,0,9" || last != "10" {
		t.Fatalf("changes %q, positions %q, last %q", got, lasts, last)
	}
	stop := errors.New("stop")
	n := 0
	err = readSSE(strings.NewReader(sseSample), &last, func(api.Change, []byte) error { n++; return stop })
	var ce callbackError
	if n != 1 || !errors.As(err, &ce) || ce.err != stop {
		t.Fatalf("callback error: %d calls, %v", n, err)
	}
	if err := readSSE(strings.NewReader("data: {not json\n\n"), &last, func(api.Change, []byte) error { return nil }); err == nil {
		t.Fatal("a malformed change was accepted")
	}
}

// FuzzReadSSE: any byte stream is read without panicking, and every change
// handed out is valid JSON.
func FuzzReadSSE(f *testing.F) {
	f.Add([]byte(sseSample))
	f.Add([]byte("data: {}\n\nid: 1\n\n:\n\n"))
	f.Add([]byte("data\ndata:\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		last := ""
		_ = readSSE(strings.NewReader(string(b)), &last, func(c api.Change, raw []byte) error {
			if !json.Valid(raw) {
				t.Fatalf("invalid change handed out: %q", raw)
			}
			return nil
		})
	})
}
