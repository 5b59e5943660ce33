package app_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mewledger/ledger/internal/server/app"
)

// TestValidateChangesNothing: Validate only checks (a zero Options is out
// of range until EnsureDefaults fills it) and EnsureDefaults only fills:
// Pebble's split of the two.
func TestValidateChangesNothing(t *testing.T) {
	var o app.Options
	if err := o.Validate(); !errors.Is(err, app.ErrOptions) {
		t.Fatalf("Validate of a zero Options = %v, want ErrOptions", err)
	}
	if !reflect.DeepEqual(o, app.Options{}) {
		t.Fatalf("Validate changed the options: %+v", o)
	}
	o.EnsureDefaults()
	filled := o
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, filled) {
		t.Fatal("Validate changed defaulted options")
	}
	if o.Replicas != app.DefaultReplicas || o.DupWindow != app.DefaultDupWindow {
		t.Fatalf("EnsureDefaults: replicas %d, dup window %v", o.Replicas, o.DupWindow)
	}
}
