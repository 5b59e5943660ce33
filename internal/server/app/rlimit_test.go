package app

import (
	"errors"
	"strings"
	"testing"
)

// TestFitDescriptors (issue 29 item 1): the HTTP connection cap plus
// DescriptorReserve must fit under the descriptor limit. A default cap is
// lowered to fit, with a warning; an explicit one that does not fit stops
// the start with a message naming both numbers; a limit too low for even
// a small cap stops it too.
func TestFitDescriptors(t *testing.T) {
	defer func(f func() (uint64, error)) { descriptorLimit = f }(descriptorLimit)
	limit := uint64(512)
	descriptorLimit = func() (uint64, error) { return limit, nil }

	o := Options{}
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	warn, err := fitDescriptors(&o)
	if err != nil || o.MaxConns != 512-DescriptorReserve || !strings.Contains(warn, "capped at 256") {
		t.Fatalf("default cap under 512 descriptors: %d, %q, %v", o.MaxConns, warn, err)
	}
	if o.MaxStreams > o.MaxConns/4 {
		t.Fatalf("streams %d over a quarter of %d connections", o.MaxStreams, o.MaxConns)
	}

	o = Options{MaxConns: 400}
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := fitDescriptors(&o); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "512") || !strings.Contains(err.Error(), "--http-max-conns") {
		t.Fatalf("explicit 400 under 512 descriptors: %v", err)
	}

	limit = 200
	o = Options{}
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := fitDescriptors(&o); !errors.Is(err, ErrOptions) {
		t.Fatalf("default cap under 200 descriptors: %v, want an error", err)
	}

	limit = 1 << 20
	o = Options{MaxConns: 4000}
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if warn, err := fitDescriptors(&o); err != nil || warn != "" || o.MaxConns != 4000 {
		t.Fatalf("4000 under a million: %d %q %v", o.MaxConns, warn, err)
	}
}
