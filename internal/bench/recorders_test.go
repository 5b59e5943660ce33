package bench

import (
	"context"
	"strings"
	"testing"
)

// TestRecordersRows runs the three-recorder rows (left out of --quick)
// with tiny sizes: each envelope stored once, answered duplicate to the
// two other recorders, two rows with a value per repetition.
func TestRecordersRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server and a gateway child")
	}
	o := tinyOptions(t)
	o.Quick = false
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.BridgeEvents = 300
	frames, _, err := bridgeFrames(o.BridgeEvents, o.PadTo)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := r.recordersRows(context.Background(), &o, len(frames)); err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 || !strings.Contains(r.Rows[0].Figure, "three recorders") {
		t.Fatalf("rows %+v", r.Rows)
	}
	for _, row := range r.Rows {
		if len(row.Values) != o.Reps {
			t.Errorf("%s: %d values, want %d", row.Figure, len(row.Values), o.Reps)
		}
		for _, v := range row.Values {
			if v <= 0 {
				t.Errorf("%s: value %v", row.Figure, v)
			}
		}
	}
}
