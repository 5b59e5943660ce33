package projections

import "errors"

// Errors of this package.
var (
	// ErrNotFound is returned by reads of a proposal or history that does
	// not exist.
	ErrNotFound = errors.New("projections: not found")
	// ErrClosed is returned by operations on a closed store or projector.
	ErrClosed = errors.New("projections: closed")
)
