package blockfile

import (
	"encoding/binary"
	"errors"
	"testing"
)

// record builds one record as nats-server's filestore writes it.
func record(seq uint64, subj string, hdr, msg []byte) []byte {
	rl := hdrSize + len(subj) + len(msg) + hashSize
	if hdr != nil {
		rl += 4 + len(hdr)
	}
	b := make([]byte, hdrSize, rl)
	l := uint32(rl)
	if hdr != nil {
		l |= hbit
	}
	binary.LittleEndian.PutUint32(b, l)
	binary.LittleEndian.PutUint64(b[4:], seq)
	binary.LittleEndian.PutUint64(b[12:], 1234)
	binary.LittleEndian.PutUint16(b[20:], uint16(len(subj)))
	b = append(b, subj...)
	if hdr != nil {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
		b = append(b, hdr...)
	}
	b = append(b, msg...)
	return append(b, Checksum("LEDGER", 1, append(b, make([]byte, hashSize)...))...)
}

// FuzzParse: the reader of stored records never panics, refuses bytes
// that are not records with ErrBadRecord, and reads back what it wrote.
func FuzzParse(f *testing.F) {
	f.Add(record(1, "ledger.default.x", nil, []byte(`{"a":1}`)))
	f.Add(append(record(1, "s", []byte("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"), []byte("m")), record(2, "s", nil, nil)...))
	f.Add([]byte{})
	f.Add(make([]byte, hdrSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Parse(data)
		if err != nil && !errors.Is(err, ErrBadRecord) {
			t.Fatalf("error %v does not wrap ErrBadRecord", err)
		}
		end := 0
		for _, r := range rs {
			if r.Off != end || r.Len < hdrSize+hashSize {
				t.Fatalf("record at %d (len %d) after %d", r.Off, r.Len, end)
			}
			end = r.Off + r.Len
		}
		if err == nil && end != len(data) {
			t.Fatalf("read %d of %d bytes without an error", end, len(data))
		}
		// Records rebuilt from what was read are read back the same.
		var again []byte
		for _, r := range rs {
			again = append(again, record(r.Seq, r.Subj, r.Hdr, r.Msg)...)
		}
		rs2, err := Parse(again)
		if err != nil || len(rs2) != len(rs) {
			t.Fatalf("rebuilt records: %d, %v (from %d)", len(rs2), err, len(rs))
		}
		for i := range rs {
			if rs2[i].Seq != rs[i].Seq || rs2[i].Subj != rs[i].Subj || string(rs2[i].Msg) != string(rs[i].Msg) || string(rs2[i].Hdr) != string(rs[i].Hdr) {
				t.Fatalf("record %d read back differently", i)
			}
		}
	})
}
