// Package buildinfo says which build of the ledger is running: the module
// version and the version-control revision the Go toolchain stamped into
// the binary (runtime/debug.ReadBuildInfo). It is read by `ledger version`
// and by the ledger_build_info metric.
package buildinfo

import (
	"runtime"
	"runtime/debug"
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
