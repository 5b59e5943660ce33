package memlimit

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"off", 0}, {"OFF", 0}, {"0", 0}, {"200MiB", 200 << 20}, {"200M", 200 << 20}, {" 1GiB ", 1 << 30},
		{"1G", 1 << 30}, {"16384KiB", 16 << 20}, {"16777216", 16 << 20}, {"16777216B", 16 << 20},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "lots", "-1MiB", "1.5GiB", "15MiB", "1", "9999999999999GiB", "MiB"} {
		if n, err := Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %d, %v; want ErrInvalid", bad, n, err)
		}
	}
}

func TestApply(t *testing.T) {
	origLimit, origGC := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(origLimit); debug.SetGCPercent(origGC) })
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	limit := func() int64 { return debug.SetMemoryLimit(-1) } // a negative value only reads it
	gc := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

	debug.SetMemoryLimit(123 << 20)
	if n, err := Apply(env(nil)); err != nil || n != 0 || limit() != math.MaxInt64 || gc() != DefaultGCPercent {
		t.Fatalf("unset: %d, %v, limit %d, GOGC %d; want no limit and GOGC %d", n, err, limit(), gc(), DefaultGCPercent)
	}
	if n, err := Apply(env(map[string]string{EnvVar: "300MiB"})); err != nil || n != 300<<20 || limit() != 300<<20 {
		t.Fatalf("300MiB: %d, %v, limit %d", n, err, limit())
	}
	if n, err := Apply(env(map[string]string{EnvVar: "off"})); err != nil || n != 0 || limit() != math.MaxInt64 {
		t.Fatalf("off: %d, %v, limit %d; want no limit", n, err, limit())
	}
	debug.SetMemoryLimit(123 << 20)
	debug.SetGCPercent(77)
	if n, err := Apply(env(map[string]string{EnvVar: "lots"})); !errors.Is(err, ErrInvalid) || limit() != 123<<20 || gc() != 77 {
		t.Fatalf("bad value: %d, %v, limit %d, GOGC %d; want ErrInvalid and nothing changed", n, err, limit(), gc())
	}
	if n, err := Apply(env(map[string]string{GoEnvVar: "1GiB", EnvVar: "300MiB", GOGCEnvVar: "200"})); err != nil || n != -1 || limit() != 123<<20 || gc() != 77 {
		t.Fatalf("GOMEMLIMIT and GOGC set: %d, %v, limit %d, GOGC %d; want both left alone", n, err, limit(), gc())
	}
}
