package archive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"time"
	"unicode/utf8"
)

// MaxLineBytes bounds one line of an export: a 1 MiB envelope of control
// characters escaped as \u00XX is 6 MiB, plus headers.
const MaxLineBytes = 16 << 20

// HashSize is the size of a chain hash in bytes.
const HashSize = sha256.Size

// Errors of this package. Line errors are *LineError values that wrap one
// of the first three.
var (
	// ErrMalformed: a line is not a valid record (not JSON, a missing or
	// bad field, both or neither of raw and raw_b64, over MaxLineBytes).
	ErrMalformed = errors.New("archive: malformed line")
	// ErrHashMismatch: a line's hash is not the hash of its content
	// chained to the previous line.
	ErrHashMismatch = errors.New("archive: hash mismatch")
	// ErrSeqOrder: a line's seq is not greater than the previous line's.
	ErrSeqOrder = errors.New("archive: sequence not increasing")
)

// LineError names the first line of a file that does not verify.
type LineError struct {
	Line int    // 1-based line number
	Seq  uint64 // the line's seq when it could be read, else 0
	Kind error  // ErrMalformed, ErrHashMismatch or ErrSeqOrder
	Msg  string // what exactly is wrong
}

func (e *LineError) Error() string {
	if e.Seq > 0 {
		return fmt.Sprintf("%v: line %d (seq %d): %s", e.Kind, e.Line, e.Seq, e.Msg)
	}
	return fmt.Sprintf("%v: line %d: %s", e.Kind, e.Line, e.Msg)
}

// Unwrap returns the kind, for errors.Is.
func (e *LineError) Unwrap() error { return e.Kind }

// Record is one stored message of the log, as exported. Time is kept as
// the string written (RFC 3339 with nanoseconds, UTC) because the chain
// hashes that string.
type Record struct {
	Seq     uint64
	Time    string
	Subject string
	Headers map[string][]string
	Raw     []byte
	// Hash is the line's chain hash (hex); empty in replay output, which
	// has no chain.
	Hash string
	// MissingBefore, in an export made with gaps allowed, names the
	// sequences missing from the log just before this one (contract §9:
	// an export never hides a hole). Not part of the chain: the seqs
	// themselves are.
	MissingBefore *SeqRange
}

// SeqRange is the sequences From..To, both included.
type SeqRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

func (r SeqRange) String() string {
	if r.From == r.To {
		return fmt.Sprintf("seq %d", r.From)
	}
	return fmt.Sprintf("seq %d..%d", r.From, r.To)
}

// FormatTime is the time encoding of records: RFC 3339 with nanoseconds,
// UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParsedTime returns Time parsed.
func (r *Record) ParsedTime() (time.Time, error) { return time.Parse(time.RFC3339Nano, r.Time) }

// recordJSON is the wire form of a Record.
type recordJSON struct {
	Seq     uint64              `json:"seq"`
	Time    string              `json:"time"`
	Subject string              `json:"subject"`
	Headers map[string][]string `json:"headers"`
	Raw     *string             `json:"raw,omitempty"`
	RawB64  *string             `json:"raw_b64,omitempty"`
	Hash    string              `json:"hash,omitempty"`
	Missing *SeqRange           `json:"missing_before,omitempty"`
}

// AppendJSON appends r as one JSON line (with its newline) to buf: raw as
// a string when it is valid UTF-8, raw_b64 otherwise; no HTML escaping;
// headers always present ({} when none); hash omitted when empty.
func (r *Record) AppendJSON(buf []byte) ([]byte, error) {
	w := recordJSON{Seq: r.Seq, Time: r.Time, Subject: r.Subject, Headers: r.Headers, Hash: r.Hash, Missing: r.MissingBefore}
	if w.Headers == nil {
		w.Headers = map[string][]string{}
	}
	if utf8.Valid(r.Raw) {
		s := string(r.Raw)
		w.Raw = &s
	} else {
		s := base64.StdEncoding.EncodeToString(r.Raw)
		w.RawB64 = &s
	}
	b := bytes.NewBuffer(buf)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil { // Encode appends the newline
		return buf, fmt.Errorf("archive: encode seq %d: %w", r.Seq, err)
	}
	return b.Bytes(), nil
}

// parseRecord decodes one line (without its newline). It checks the shape
// only; the chain is checked by ChainReader.
func parseRecord(line []byte) (*Record, string) {
	var w recordJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, "not a record: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "trailing data after the record"
	}
	r := &Record{Seq: w.Seq, Time: w.Time, Subject: w.Subject, Headers: w.Headers, Hash: w.Hash, MissingBefore: w.Missing}
	switch {
	case w.Seq == 0:
		return r, "seq is missing or 0"
	case w.Subject == "":
		return r, "subject is missing"
	case w.Time == "":
		return r, "time is missing"
	case w.Hash == "":
		return r, "hash is missing"
	case w.Raw != nil && w.RawB64 != nil:
		return r, "both raw and raw_b64 are present"
	case w.Raw == nil && w.RawB64 == nil:
		return r, "neither raw nor raw_b64 is present"
	}
	if _, err := r.ParsedTime(); err != nil {
		return r, fmt.Sprintf("time %q is not RFC 3339: %v", w.Time, err)
	}
	if w.Raw != nil {
		r.Raw = []byte(*w.Raw)
	} else {
		raw, err := base64.StdEncoding.DecodeString(*w.RawB64)
		if err != nil {
			return r, "raw_b64 is not base64: " + err.Error()
		}
		r.Raw = raw
	}
	return r, ""
}

// ChainHash returns H(n) of the package doc for r chained to prev.
func ChainHash(prev [HashSize]byte, r *Record) [HashSize]byte {
	h := sha256.New()
	h.Write(prev[:])
	writeU64(h, r.Seq)
	writeBytes(h, []byte(r.Time))
	writeBytes(h, []byte(r.Subject))
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	writeU64(h, uint64(len(names)))
	for _, k := range names {
		writeBytes(h, []byte(k))
		vs := r.Headers[k]
		writeU64(h, uint64(len(vs)))
		for _, v := range vs {
			writeBytes(h, []byte(v))
		}
	}
	writeBytes(h, r.Raw)
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

func writeU64(h hash.Hash, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	h.Write(b[:])
}

func writeBytes(h hash.Hash, b []byte) {
	writeU64(h, uint64(len(b)))
	h.Write(b)
}

// Summary describes a verified (or written) file.
type Summary struct {
	Lines    int    `json:"lines"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Contiguous is true when every line's seq is the previous one's + 1
	// (always the case for an export of the append-only LEDGER stream).
	Contiguous bool `json:"contiguous"`
	// Missing lists the sequences missing between the file's first and
	// last lines (and, for an export, those at its end the log did not
	// answer).
	Missing []SeqRange `json:"missing,omitempty"`
	// Head is the last line's hash (hex); the zero hash for an empty file.
	Head string `json:"head"`
	// TreeRoot is the Merkle root (standard base64) of the file's lines as
	// the leaves of the ledger's tree (tree.go), when the file is the log
	// from seq 1 without a gap: a signed checkpoint of Lines leaves names
	// the same root. Empty otherwise.
	TreeRoot string `json:"tree_root,omitempty"`
}

// ChainReader reads an export line by line and verifies each line against
// the chain as it goes. It holds one line in memory at a time.
type ChainReader struct {
	br   *bufio.Reader
	line int
	prev [HashSize]byte
	sum  Summary
	err  error
	buf  []byte
	tree treeRoot
}

// NewChainReader returns a reader of r from its current position.
func NewChainReader(r io.Reader) *ChainReader {
	return &ChainReader{br: bufio.NewReaderSize(r, 1<<16), sum: Summary{Contiguous: true, Head: hex.EncodeToString(make([]byte, HashSize))}, tree: newTreeRoot()}
}

// Summary returns what has been verified so far.
func (c *ChainReader) Summary() Summary {
	s := c.sum
	s.TreeRoot = c.tree.root()
	return s
}

// readLine returns the next line without its newline, io.EOF at the end.
func (c *ChainReader) readLine() ([]byte, error) {
	c.buf = c.buf[:0]
	for {
		frag, err := c.br.ReadSlice('\n')
		c.buf = append(c.buf, frag...)
		if len(c.buf) > MaxLineBytes+1 {
			return nil, &LineError{Line: c.line + 1, Kind: ErrMalformed, Msg: fmt.Sprintf("line is longer than %d bytes", MaxLineBytes)}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(c.buf[:len(c.buf)-1], []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(c.buf) == 0 {
				return nil, io.EOF
			}
			return c.buf, nil // last line without a newline
		default:
			return nil, fmt.Errorf("archive: read line %d: %w", c.line+1, err)
		}
	}
}

// Next returns the next verified record, io.EOF after the last line, or
// the first error (a *LineError for a bad line, which stops the reader).
// The returned record does not alias the reader's buffers.
func (c *ChainReader) Next() (*Record, error) {
	if c.err != nil {
		return nil, c.err
	}
	rec, err := c.next()
	if err != nil {
		c.err = err
	}
	return rec, err
}

func (c *ChainReader) next() (*Record, error) {
	line, err := c.readLine()
	if err != nil {
		return nil, err
	}
	c.line++
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, &LineError{Line: c.line, Kind: ErrMalformed, Msg: "empty line"}
	}
	rec, bad := parseRecord(line)
	if bad != "" {
		var seq uint64
		if rec != nil {
			seq = rec.Seq
		}
		return nil, &LineError{Line: c.line, Seq: seq, Kind: ErrMalformed, Msg: bad}
	}
	if c.sum.Lines > 0 && rec.Seq <= c.sum.LastSeq {
		return nil, &LineError{Line: c.line, Seq: rec.Seq, Kind: ErrSeqOrder,
			Msg: fmt.Sprintf("seq %d follows seq %d", rec.Seq, c.sum.LastSeq)}
	}
	want := ChainHash(c.prev, rec)
	if got := hex.EncodeToString(want[:]); got != rec.Hash {
		return nil, &LineError{Line: c.line, Seq: rec.Seq, Kind: ErrHashMismatch,
			Msg: fmt.Sprintf("line says %.16s…, content hashes to %.16s… (the line or one before it was changed)", rec.Hash, got)}
	}
	if c.sum.Lines == 0 {
		c.sum.FirstSeq = rec.Seq
	} else if rec.Seq != c.sum.LastSeq+1 {
		c.sum.Contiguous = false
		c.sum.Missing = append(c.sum.Missing, SeqRange{c.sum.LastSeq + 1, rec.Seq - 1})
	}
	c.prev = want
	c.sum.Lines++
	c.sum.LastSeq = rec.Seq
	c.sum.Head = rec.Hash
	c.tree.add(rec)
	return rec, nil
}

// VerifyChain reads a whole export and recomputes its chain. It returns
// the summary of the file, or the first line that does not verify as a
// *LineError (errors.Is ErrMalformed, ErrHashMismatch or ErrSeqOrder) with
// the summary of the lines before it.
func VerifyChain(r io.Reader) (Summary, error) {
	c := NewChainReader(r)
	for {
		_, err := c.Next()
		if errors.Is(err, io.EOF) {
			return c.Summary(), nil
		}
		if err != nil {
			return c.Summary(), err
		}
	}
}

// chainWriter computes hashes while writing records.
type chainWriter struct {
	w    *bufio.Writer
	prev [HashSize]byte
	sum  Summary
	buf  []byte
	tree treeRoot
}

func newChainWriter(w io.Writer) *chainWriter {
	return &chainWriter{w: bufio.NewWriterSize(w, 1<<16), sum: Summary{Contiguous: true, Head: hex.EncodeToString(make([]byte, HashSize))}, tree: newTreeRoot()}
}

func (cw *chainWriter) write(r *Record) error {
	h := ChainHash(cw.prev, r)
	r.Hash = hex.EncodeToString(h[:])
	var err error
	if cw.buf, err = r.AppendJSON(cw.buf[:0]); err != nil {
		return err
	}
	if _, err := cw.w.Write(cw.buf); err != nil {
		return fmt.Errorf("archive: write seq %d: %w", r.Seq, err)
	}
	if cw.sum.Lines == 0 {
		cw.sum.FirstSeq = r.Seq
	} else if r.Seq != cw.sum.LastSeq+1 {
		cw.sum.Contiguous = false
		cw.sum.Missing = append(cw.sum.Missing, SeqRange{cw.sum.LastSeq + 1, r.Seq - 1})
	}
	cw.prev = h
	cw.sum.Lines++
	cw.sum.LastSeq = r.Seq
	cw.sum.Head = r.Hash
	cw.tree.add(r)
	return nil
}

func (cw *chainWriter) flush() error {
	cw.sum.TreeRoot = cw.tree.root()
	if err := cw.w.Flush(); err != nil {
		return fmt.Errorf("archive: flush: %w", err)
	}
	return nil
}
