package main

import (
	"context"
	"fmt"
	"io"
)

// The ops subcommands (SPEC §9) live in their own files with the
// signature runX(ctx, args, stdout, stderr); they report usage errors
// wrapping errOpsUsage, which the dispatcher maps to exit status 2.
func init() {
	ops := func(name, short string, f func(context.Context, []string, io.Writer, io.Writer) error) {
		register(&command{
			name:     name,
			synopsis: name + " [flags]",
			short:    short,
			help:     fmt.Sprintf("Run 'ledger %s --help' for its flags.", name),
			run: func(ctx context.Context, e env, args []string) error {
				// `import -f -` and `verify --export -` read the
				// dispatcher's stdin (main's os.Stdin, a test's reader).
				if e.stdin != nil {
					opsStdin = e.stdin
				}
				return f(ctx, args, e.stdout, e.stderr)
			},
			selfHelp: true,
		})
	}
	ops("rebuild", "drop the projection and fold the stream again from sequence 1", runRebuild)
	ops("at", "answer get / history / list / stats as of a past sequence or time", runAt)
	ops("replay", "stream the log's original envelopes out, or republish them", runReplay)
	ops("export", "write the log as JSON lines with sequence, time, subject and hash chain", runExport)
	ops("import", "append an exported log into a ledger", runImport)
	ops("verify", "rebuild into a temporary store and compare; check an export's hash chain", runVerify)
}
