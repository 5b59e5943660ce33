package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mewledger/ledger/internal/lib/buildinfo"
)

func init() {
	register(&command{
		name:     "version",
		synopsis: "version [-o table|json]",
		short:    "show the build's version and revision",
		help: "Prints the module version and the version-control revision stamped into\n" +
			"the binary by the Go toolchain (\"(devel)\" and the commit for a build from\n" +
			"a clone; \"modified\" when the work tree had uncommitted changes), and the\n" +
			"Go version. The same labels are on the ledger_build_info metric.",
		run: runVersion,
	})
}

func runVersion(_ context.Context, e env, args []string) error {
	var output string
	f := newFlags(commands["version"], e)
	f.str(&output, "output", "table|json", outputTable, "table, or json", false)
	f.short("o", "output")
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError("version takes no arguments")
	}
	i := buildinfo.Get()
	switch output {
	case outputJSON:
		b, err := json.Marshal(i)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(e.stdout, string(b))
		return err
	case outputTable, "":
		_, err = fmt.Fprintf(e.stdout, "ledger %s\nmodule %s\nrevision %s\ngo %s\n", i.Short(), i.Module, i.Revision, i.GoVersion)
		return err
	default:
		return usageError("--output %q: want table or json", output)
	}
}
