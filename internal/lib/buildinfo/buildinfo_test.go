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

// TestSemVer: the version nats micro accepts, from every form the Go
// toolchain stamps.
func TestSemVer(t *testing.T) {
	for _, c := range []struct {
		i    Info
		want string
	}{
		{Info{Version: "v1.2.3"}, "1.2.3"},
		{Info{Version: "v0.0.0-20260101120000-abcdef123456"}, "0.0.0-20260101120000-abcdef123456"},
		{Info{Version: "v1.2.4-0.20260101120000-abcdef123456+dirty"}, "1.2.4-0.20260101120000-abcdef123456+dirty"},
		{Info{Version: "(devel)", Revision: "0123456789abcdef0123"}, "0.0.0-devel+0123456789ab"},
		{Info{Version: "unknown", Revision: "unknown"}, "0.0.0-devel+unknown"},
		{Info{Version: "(devel)"}, "0.0.0-devel"},
	} {
		if got := c.i.SemVer(); got != c.want || !semver.MatchString(got) {
			t.Errorf("%+v.SemVer() = %q, want %q", c.i, got, c.want)
		}
	}
}
