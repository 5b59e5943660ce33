// Package buildinfo says which build of the ledger is running: the module
// version and the version-control revision the Go toolchain stamped into
// the binary (runtime/debug.ReadBuildInfo). It is read by `ledger version`
// and by the ledger_build_info metric.
package buildinfo

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Info is the build's identity. Fields the toolchain did not stamp (a test
// binary, a build outside a repository) are "unknown" or empty.
type Info struct {
	Module    string `json:"module"`
	Version   string `json:"version"`  // module version, "(devel)" for a local build
	Revision  string `json:"revision"` // VCS revision, "unknown" when not stamped
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"` // the work tree had uncommitted changes
	GoVersion string `json:"go_version"`
}

var (
	once sync.Once
	info Info
)

// Get returns the running binary's build information. Safe for concurrent
// use; computed once.
func Get() Info {
	once.Do(func() { info = read(debug.ReadBuildInfo()) })
	return info
}

func read(bi *debug.BuildInfo, ok bool) Info {
	i := Info{Module: "github.com/mewledger/ledger", Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	if !ok || bi == nil {
		return i
	}
	if bi.Main.Path != "" {
		i.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// semver is Semantic Versioning 2.0.0 (the form nats micro requires of a
// service's version).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// SemVer is the version as Semantic Versioning requires it (a nats micro
// service's version): the module version without its "v" ("1.2.3", a Go
// pseudo-version "0.0.0-20260101120000-abcdef123456"), or for a build
// with no module version ("(devel)", "unknown") "0.0.0-devel", with the
// revision's first 12 characters as build metadata when known
// ("0.0.0-devel+abcdef123456").
func (i Info) SemVer() string {
	if v := strings.TrimPrefix(i.Version, "v"); semver.MatchString(v) {
		return v
	}
	v := "0.0.0-devel"
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && semver.MatchString(v+"+"+rev) {
		v += "+" + rev
	}
	return v
}

// Short is the one-line form: "v1.2.3 (abcdef123456, modified)".
func (i Info) Short() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += ", modified"
	}
	return i.Version + " (" + rev + ")"
}
