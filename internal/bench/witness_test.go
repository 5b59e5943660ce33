package bench

import (
	"errors"
	"testing"
)

// The witness figure builds and runs litewitness: it runs only when named.
func TestWitnessFigureOnlyWhenNamed(t *testing.T) {
	all := Options{}
	if all.runs(FigWitness) {
		t.Fatal("a run of every figure runs the witness figure")
	}
	o := Options{Quick: true, Only: []string{FigWitness}}
	if err := o.Validate(); err != nil {
		t.Fatalf("--only witness: %v", err)
	}
	if !o.runs(FigWitness) || o.runs(FigFold) {
		t.Fatalf("--only witness runs witness %t, fold %t", o.runs(FigWitness), o.runs(FigFold))
	}
	bad := Options{Quick: true, Only: []string{"witnesses"}}
	if err := bad.Validate(); !errors.Is(err, ErrOptions) {
		t.Fatalf("an unknown figure: %v", err)
	}
}
