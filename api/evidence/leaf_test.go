package evidence_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/mewledger/ledger/api/evidence"
)

// TestLeafBytes pins the version 1 encoding byte by byte (docs/proofs.md
// shows the same example).
func TestLeafBytes(t *testing.T) {
	l := &evidence.Leaf{
		Seq:     1,
		Time:    time.Unix(0, 0x0102030405060708).UTC(),
		Subject: "a.b",
		Headers: []evidence.Header{{Name: "Nats-Msg-Id", Value: "x"}},
		Data:    []byte("{}"),
	}
	got, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := "01" + // version
		"0000000000000001" + // seq
		"0102030405060708" + // time, unix nanos
		"00000003" + hex.EncodeToString([]byte("a.b")) +
		"00000001" + // one header
		"0000000b" + hex.EncodeToString([]byte("Nats-Msg-Id")) +
		"00000001" + hex.EncodeToString([]byte("x")) +
		"00000002" + hex.EncodeToString([]byte("{}"))
	if hex.EncodeToString(got) != want {
		t.Fatalf("leaf bytes\n got %x\nwant %s", got, want)
	}
	// The leaf hash is RFC 6962's, as an independent implementation computes it.
	h, err := l.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if ind := rfc6962.DefaultHasher.HashLeaf(got); !bytes.Equal(ind, h[:]) || evidence.LeafHash(got) != h {
		t.Fatalf("leaf hash %s, transparency-dev says %x", h, ind)
	}
}

func TestLeafRoundTrip(t *testing.T) {
	cases := []*evidence.Leaf{
		testLeaf(1, "a"),
		{Seq: math.MaxInt64, Time: time.Unix(0, math.MinInt64), Subject: "s", Data: []byte{}},
		{Seq: 7, Time: time.Unix(0, -1), Subject: "ledger.~w6k.k.proposal.a", Data: []byte{0xff, 0x00, 0xfe},
			Headers: []evidence.Header{{Name: "Nats-Msg-Id", Value: ""}, {Name: "Ledger-Msg-Id-Clash", Value: "c"}}},
	}
	for _, l := range cases {
		b, err := l.MarshalBinary()
		if err != nil {
			t.Fatalf("seq %d: %v", l.Seq, err)
		}
		got, err := evidence.ParseLeaf(b)
		if err != nil {
			t.Fatalf("seq %d: %v", l.Seq, err)
		}
		if !got.Equal(l) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, l)
		}
		again, _ := got.MarshalBinary()
		if !bytes.Equal(again, b) {
			t.Fatalf("seq %d: re-encoding differs", l.Seq)
		}
		if got.Time.Location() != time.UTC {
			t.Fatalf("parsed time not UTC")
		}
	}
	// Headers given out of order encode sorted: the same bytes.
	a := &evidence.Leaf{Seq: 1, Time: t0, Subject: "s", Headers: []evidence.Header{{"B", "2"}, {"A", "1"}}}
	b := &evidence.Leaf{Seq: 1, Time: t0, Subject: "s", Headers: []evidence.Header{{"A", "1"}, {"B", "2"}}}
	ab, _ := a.MarshalBinary()
	bb, _ := b.MarshalBinary()
	if !bytes.Equal(ab, bb) {
		t.Fatal("header order changes the encoding")
	}
	if a.Header("B") != "2" || a.Header("C") != "" {
		t.Fatal("Header lookup")
	}
}

func TestLeafEncodeRefuses(t *testing.T) {
	for name, l := range map[string]*evidence.Leaf{
		"seq 0":          {Seq: 0, Time: t0, Subject: "s"},
		"seq too large":  {Seq: math.MaxInt64 + 1, Time: t0, Subject: "s"},
		"empty subject":  {Seq: 1, Time: t0},
		"time too early": {Seq: 1, Time: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), Subject: "s"},
		"empty header":   {Seq: 1, Time: t0, Subject: "s", Headers: []evidence.Header{{"", "v"}}},
		"header twice":   {Seq: 1, Time: t0, Subject: "s", Headers: []evidence.Header{{"A", "1"}, {"A", "2"}}},
	} {
		if _, err := l.MarshalBinary(); !errors.Is(err, evidence.ErrLeafEncoding) {
			t.Errorf("%s: err %v, want ErrLeafEncoding", name, err)
		}
	}
}

// TestParseLeafRefuses: every non-canonical input fails with
// ErrLeafEncoding: each truncation, trailing bytes, another version,
// headers out of order or repeated, seq 0.
func TestParseLeafRefuses(t *testing.T) {
	good, err := (&evidence.Leaf{Seq: 3, Time: t0, Subject: "a.b",
		Headers: []evidence.Header{{"A", "1"}, {"B", "2"}}, Data: []byte("xyz")}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(good); n++ {
		if _, err := evidence.ParseLeaf(good[:n]); !errors.Is(err, evidence.ErrLeafEncoding) {
			t.Fatalf("truncated to %d: err %v", n, err)
		}
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// Offsets: 0 version, 1 seq, 9 time, 17 subject len, 21 "a.b",
	// 24 count, 28 len "A", 32 "A", 33 len "1", 37 "1", 38 len "B", 42 "B".
	for name, b := range map[string][]byte{
		"trailing":    append(bytes.Clone(good), 0),
		"version 2":   mut(func(b []byte) []byte { b[0] = 2; return b }),
		"seq 0":       mut(func(b []byte) []byte { copy(b[1:9], make([]byte, 8)); return b }),
		"empty subj":  append(append(bytes.Clone(good[:17]), 0, 0, 0, 0), good[24:]...),
		"header desc": mut(func(b []byte) []byte { b[32], b[42] = 'B', 'A'; return b }),
		"header dup":  mut(func(b []byte) []byte { b[42] = 'A'; return b }),
		"huge count":  mut(func(b []byte) []byte { b[24] = 0x7f; return b }),
		"huge field":  mut(func(b []byte) []byte { b[17] = 0x7f; return b }),
	} {
		if _, err := evidence.ParseLeaf(b); !errors.Is(err, evidence.ErrLeafEncoding) {
			t.Errorf("%s: err %v, want ErrLeafEncoding", name, err)
		}
	}
}

func FuzzParseLeaf(f *testing.F) {
	for i := uint64(1); i < 4; i++ {
		b, _ := testLeaf(i, "f").MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := evidence.ParseLeaf(b)
		if err != nil {
			if !errors.Is(err, evidence.ErrLeafEncoding) {
				t.Fatalf("error %v does not wrap ErrLeafEncoding", err)
			}
			return
		}
		// Canonical: what parses re-encodes to the same bytes.
		again, err := l.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed leaf does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical:\n in  %x\n out %x", b, again)
		}
	})
}
