// Package blockfile damages a stopped (or running) JetStream file store
// the way storage really breaks, for the tests of the ledger's own log
// check (contract §16): it reads the records of a stream's message block
// files (<store>/jetstream/$G/streams/<stream>/msgs/<n>.blk, nats-server's
// filestore format) and flips a byte without fixing the record's checksum,
// rewrites a record with a valid checksum, truncates a block or removes
// it. Not for production code.
//
// A record is: total_len(4, high bit set when it has headers) seq(8)
// timestamp(8) subj_len(2) subj [hdr_len(4) hdr] msg hash(8), little
// endian; hash is the first 8 bytes of HighwayHash-64 keyed with
// sha256("<stream>-<block index>") over seq‖timestamp‖subj‖hdr‖msg.
package blockfile

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/minio/highwayhash"
)

const (
	hdrSize  = 22
	hashSize = 8
	hbit     = 1 << 31
	ebit     = 1 << 63
	tbit     = 1 << 62
)

// ErrBadRecord is returned for bytes that are not a block's records.
var ErrBadRecord = errors.New("blockfile: not a message record")

// Record is one record of a block file.
type Record struct {
	Seq  uint64
	TS   int64
	Off  int // offset of the record in the file
	Len  int // its length
	Subj string
	Hdr  []byte // nil when it has none
	Msg  []byte
	// Erased or Tombstone records hold no message.
	Erased, Tombstone bool
}

// Blocks returns the stream's block files under the NATS store directory
// storeDir, in block order.
func Blocks(storeDir, stream string) ([]string, error) {
	dir := filepath.Join(storeDir, "jetstream", "$G", "streams", stream, "msgs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type blk struct {
		n    int
		path string
	}
	var bs []blk
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		bs = append(bs, blk{n, filepath.Join(dir, e.Name())})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].n < bs[j].n })
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.path
	}
	return out, nil
}

// Parse reads the records of a block file's bytes. It never panics: bytes
// that are not records end it with ErrBadRecord (the records before are
// returned).
func Parse(buf []byte) ([]Record, error) {
	var out []Record
	le := binary.LittleEndian
	for off := 0; off < len(buf); {
		if len(buf)-off < hdrSize {
			return out, fmt.Errorf("%w: %d bytes left at offset %d", ErrBadRecord, len(buf)-off, off)
		}
		h := buf[off:]
		rl := le.Uint32(h)
		hasHdr := rl&hbit != 0
		rl &^= hbit
		slen := int(le.Uint16(h[20:]))
		if int(rl) < hdrSize+hashSize+slen || int(rl) > len(buf)-off {
			return out, fmt.Errorf("%w: length %d at offset %d", ErrBadRecord, rl, off)
		}
		r := Record{Off: off, Len: int(rl), TS: int64(le.Uint64(h[12:]))}
		seq := le.Uint64(h[4:])
		r.Tombstone, r.Erased = seq&tbit != 0, seq&ebit != 0
		r.Seq = seq &^ (ebit | tbit)
		body := h[hdrSize : int(rl)-hashSize]
		r.Subj = string(body[:slen])
		rest := body[slen:]
		if hasHdr {
			if len(rest) < 4 {
				return out, fmt.Errorf("%w: header length at offset %d", ErrBadRecord, off)
			}
			hl := int(le.Uint32(rest))
			if hl < 0 || hl > len(rest)-4 {
				return out, fmt.Errorf("%w: header length %d at offset %d", ErrBadRecord, hl, off)
			}
			r.Hdr, rest = rest[4:4+hl], rest[4+hl:]
		}
		r.Msg = rest
		out = append(out, r)
		off += int(rl)
	}
	return out, nil
}

// Find returns the block file holding seq and its record.
func Find(storeDir, stream string, seq uint64) (string, Record, error) {
	paths, err := Blocks(storeDir, stream)
	if err != nil {
		return "", Record{}, err
	}
	for _, p := range paths {
		buf, err := os.ReadFile(p)
		if err != nil {
			return "", Record{}, err
		}
		rs, _ := Parse(buf)
		for _, r := range rs {
			if r.Seq == seq && !r.Erased && !r.Tombstone {
				return p, r, nil
			}
		}
	}
	return "", Record{}, fmt.Errorf("blockfile: seq %d not in %s's blocks", seq, stream)
}

// FlipByte changes the last byte of seq's message without fixing the
// record's checksum.
func FlipByte(storeDir, stream string, seq uint64) error {
	path, r, err := Find(storeDir, stream, seq)
	if err != nil {
		return err
	}
	at := r.Off + r.Len - hashSize - 1
	return patch(path, at, func(b byte) byte { return b ^ 0x01 })
}

// Rewrite replaces seq's message by edit(msg) (same length) and writes
// the record's checksum anew: the store serves the edited bytes.
func Rewrite(storeDir, stream string, seq uint64, edit func([]byte) []byte) error {
	path, r, err := Find(storeDir, stream, seq)
	if err != nil {
		return err
	}
	msg := edit(append([]byte(nil), r.Msg...))
	if len(msg) != len(r.Msg) {
		return fmt.Errorf("blockfile: Rewrite must keep the length (%d, not %d)", len(r.Msg), len(msg))
	}
	index, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".blk"))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, r.Len)
	if _, err := f.ReadAt(buf, int64(r.Off)); err != nil {
		return err
	}
	msgAt := r.Len - hashSize - len(msg)
	copy(buf[msgAt:], msg)
	sum := Checksum(stream, index, buf)
	copy(buf[r.Len-hashSize:], sum)
	if _, err := f.WriteAt(buf, int64(r.Off)); err != nil {
		return err
	}
	return f.Sync()
}

// Checksum returns the 8-byte checksum of a record (its bytes, checksum
// included or not) in block index of stream.
func Checksum(stream string, index int, rec []byte) []byte {
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", stream, index)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	le := binary.LittleEndian
	rl := le.Uint32(rec) &^ hbit
	hasHdr := le.Uint32(rec)&hbit != 0
	slen := int(le.Uint16(rec[20:]))
	hh.Write(rec[4:20])
	hh.Write(rec[hdrSize : hdrSize+slen])
	data := rec[hdrSize+slen : int(rl)-hashSize]
	if hasHdr {
		data = data[4:]
	}
	hh.Write(data)
	var out [8]byte
	return hh.Sum(out[:0])
}

// Truncate cuts seq's block file at seq's record: it and every record
// after it in that block are gone.
func Truncate(storeDir, stream string, seq uint64) error {
	path, r, err := Find(storeDir, stream, seq)
	if err != nil {
		return err
	}
	return os.Truncate(path, int64(r.Off))
}

func patch(path string, at int, f func(byte) byte) error {
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fd.Close()
	var b [1]byte
	if _, err := fd.ReadAt(b[:], int64(at)); err != nil {
		return err
	}
	b[0] = f(b[0])
	if _, err := fd.WriteAt(b[:], int64(at)); err != nil {
		return err
	}
	return fd.Sync()
}
