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
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	current := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it

	if n, err := Apply(env(nil)); err != nil || n != Default || current() != Default {
		t.Fatalf("unset: %d, %v, limit %d; want the default %d", n, err, current(), Default)
	}
	if n, err := Apply(env(map[string]string{EnvVar: "300MiB"})); err != nil || n != 300<<20 || current() != 300<<20 {
		t.Fatalf("300MiB: %d, %v, limit %d", n, err, current())
	}
	if n, err := Apply(env(map[string]string{EnvVar: "off"})); err != nil || n != 0 || current() != math.MaxInt64 {
		t.Fatalf("off: %d, %v, limit %d; want no limit", n, err, current())
	}
	debug.SetMemoryLimit(123 << 20)
	if n, err := Apply(env(map[string]string{EnvVar: "lots"})); !errors.Is(err, ErrInvalid) || current() != 123<<20 {
		t.Fatalf("bad value: %d, %v, limit %d; want ErrInvalid and the limit unchanged", n, err, current())
	}
	if n, err := Apply(env(map[string]string{GoEnvVar: "1GiB", EnvVar: "300MiB"})); err != nil || n != -1 || current() != 123<<20 {
		t.Fatalf("GOMEMLIMIT set: %d, %v, limit %d; want it left alone", n, err, current())
	}
}
