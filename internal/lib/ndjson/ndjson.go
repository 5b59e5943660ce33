// Package ndjson splits newline-delimited JSON into lines without holding
// an oversize line in memory. The HTTP API (NDJSON POST bodies) and the CLI
// (`ledger publish` input) use it, so both number lines the same way.
//
// Contract: lines are numbered from 1, counting every line of the input;
// a line ends at "\n", and a trailing "\r" is removed; blank lines (only
// JSON white space: space, tab, CR, LF) are skipped; a line longer than
// the limit is reported with its size and no data.
package ndjson

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Line is one non-blank input line.
type Line struct {
	// No is the 1-based line number in the input.
	No int
	// Data is the line without its line ending; nil when the line is over
	// the limit. It is the caller's (not reused).
	Data []byte
	// Size is the line's length in bytes (line ending excluded, but a
	// "\r" before it counted when the line is over the limit).
	Size int
}

// Oversize reports whether the line is over the limit (Data is nil).
func (l Line) Oversize() bool { return l.Data == nil }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Split reads r to its end and calls fn for every non-blank line, in
// order. A line over maxLine bytes is passed with Data nil. It stops at
// fn's first error or a read error (returned wrapped, so a caller can
// match *http.MaxBytesError).
func Split(r io.Reader, maxLine int, fn func(Line) error) error {
	if maxLine < 1 {
		return fmt.Errorf("ndjson: maxLine %d, want ≥ 1", maxLine)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for no := 1; ; no++ {
		var (
			buf   []byte
			size  int
			blank = true
			err   error
		)
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			for _, c := range chunk {
				if !isSpace(c) {
					blank = false
					break
				}
			}
			size += len(chunk)
			if size <= maxLine+2 { // room for "\r\n"
				buf = append(buf, chunk...)
			} else {
				buf = nil
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("ndjson: line %d: %w", no, err)
		}
		if !blank {
			l := Line{No: no}
			if size > maxLine+2 {
				l.Size = size
				if err == nil {
					l.Size-- // the "\n"
				}
			} else {
				if n := len(buf); n > 0 && buf[n-1] == '\n' {
					buf = buf[:n-1]
				}
				if n := len(buf); n > 0 && buf[n-1] == '\r' {
					buf = buf[:n-1]
				}
				l.Size = len(buf)
				if len(buf) <= maxLine {
					l.Data = buf
				}
			}
			if ferr := fn(l); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}
