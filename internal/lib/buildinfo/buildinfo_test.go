package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestRead(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "example.com/x", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-24T00:00:00Z"}}}
	i := read(bi, true)
	if i.Module != "example.com/x" || i.Version != "v1.2.3" || i.Revision != "0123456789abcdef0123" || !i.Modified || i.GoVersion != "go1.99" || i.Time != "2026-11-24T00:00:00Z" {
		t.Fatalf("%+v", i)
	}
	if got := i.Short(); got != "v1.2.3 (0123456789ab, modified)" {
		t.Fatalf("Short() = %q", got)
	}
	if u := read(nil, false); u.Version != "unknown" || u.Revision != "unknown" || u.GoVersion == "" {
		t.Fatalf("unstamped: %+v", u)
	}
}
