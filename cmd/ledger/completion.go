package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/mewledger/ledger/api"
)

func init() {
	register(&command{
		name:     "completion",
		synopsis: "completion bash|zsh|fish",
		short:    "print a shell completion script",
		help: "Prints a completion script for the shell named: subcommands, each\n" +
			"subcommand's flags, the values of the flags that take a fixed set (-o\n" +
			"formats, --state, --log-format, --log-level, --effect, --type, --anomaly...),\n" +
			"the shells here, and at's query\n" +
			"(get, history, list, stats) with list's flags after it. Load it with\n" +
			"  bash: source <(ledger completion bash)   (or save it under /etc/bash_completion.d/ledger)\n" +
			"  zsh:  ledger completion zsh > \"${fpath[1]}/_ledger\"   (then compinit)\n" +
			"  fish: ledger completion fish > ~/.config/fish/completions/ledger.fish",
		run: runCompletion,
	})
}

func runCompletion(ctx context.Context, e env, args []string) error {
	f := newFlags(commands["completion"], e)
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("want one shell: bash, zsh or fish")
	}
	specs := completionSpecs(ctx)
	switch pos[0] {
	case "bash":
		return writeBash(e.stdout, specs)
	case "zsh":
		return writeZsh(e.stdout, specs)
	case "fish":
		return writeFish(e.stdout, specs)
	default:
		return usageError("unknown shell %q: want bash, zsh or fish", pos[0])
	}
}

// completionSpec is what a script completes for one subcommand.
type completionSpec struct {
	name, short string
	flags       []string            // long names, without dashes
	shorts      map[string]string   // one-letter alias -> long name
	values      map[string][]string // long name -> the values it takes
	args        []string            // words for a positional argument
	ids         bool                // the positional argument is a proposal id, asked of the ledger
	inner       map[string][]string // at: query -> its flags
}

// flagLine matches a flag at the start of a usage line, in the one help
// style of every subcommand (flags.usage): "  -o, --output table|json".
var flagLine = regexp.MustCompile(`(?m)^  (?:-([A-Za-z]), )?--([a-z][a-z0-9-]+)(?: (\S+))?`)

// choices matches a placeholder that lists the values: "table|json".
var choices = regexp.MustCompile(`^[a-z0-9-]+(\|[a-z0-9-]+)*$`)

// stateValues are the values of every --state flag.
func stateValues() []string {
	out := make([]string, len(api.States))
	for i, s := range api.States {
		out[i] = string(s)
	}
	return out
}

// idsCommand lists the ids of the ledger's newest proposals for the
// scripts (the ledger the client commands find: LEDGER_API, the serve
// running on ./data or LEDGER_DATA, the default), bounded so that a ledger
// that does not answer costs the shell two seconds at most.
const idsCommand = "ledger list --ids -q --limit 200 --timeout 2s 2>/dev/null"

// atQueryNames are at's queries, in atQueries' order.
var atQueryNames = []string{"get", "history", "list", "stats"}

// completionSpecs asks every subcommand for its --help and reads its flags
// (and their value placeholders) from it, so the scripts follow the
// commands without a second list.
func completionSpecs(ctx context.Context) []completionSpec {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	specs := make([]completionSpec, 0, len(names))
	fixed := fixedValues()
	for _, n := range names {
		c := commands[n]
		var out bytes.Buffer
		_ = c.run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard}, []string{"--help"})
		sp := completionSpec{name: n, short: c.short, shorts: map[string]string{}, values: map[string][]string{}}
		seen := map[string]bool{"help": true}
		sp.flags = []string{"help"}
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			if seen[m[2]] {
				continue
			}
			seen[m[2]] = true
			sp.flags = append(sp.flags, m[2])
			if m[1] != "" {
				sp.shorts[m[1]] = m[2]
			}
			switch {
			case m[2] == "state":
				sp.values[m[2]] = stateValues()
			case fixed[m[2]] != nil:
				sp.values[m[2]] = fixed[m[2]]
			case m[3] != "" && choices.MatchString(m[3]):
				sp.values[m[2]] = strings.Split(m[3], "|")
			}
		}
		sort.Strings(sp.flags)
		switch n {
		case "get", "history", "proof":
			sp.ids = true
		case "completion":
			sp.args = []string{"bash", "zsh", "fish"}
		case "at":
			sp.args = atQueryNames
			sp.inner = map[string][]string{}
			_, list, _ := strings.Cut(atQueries, "list ")
			list, _, _ = strings.Cut(list, "|")
			for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(list, -1) {
				sp.inner["list"] = append(sp.inner["list"], m[1])
			}
			sp.values["state"] = stateValues()
		}
		specs = append(specs, sp)
	}
	return specs
}

func specNames(specs []completionSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	return strings.Join(names, " ")
}

func dashed(flags []string) string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "--" + f
	}
	return strings.Join(out, " ")
}

// valueFlags lists the flags of s that take fixed values, each with its
// spellings (--output, -o), in a stable order.
func valueFlags(s completionSpec) (longs []string, spellings map[string][]string) {
	spellings = map[string][]string{}
	for l := range s.values {
		longs = append(longs, l)
		spellings[l] = []string{"--" + l}
	}
	sort.Strings(longs)
	for sh, l := range s.shorts {
		if _, ok := s.values[l]; ok {
			spellings[l] = append(spellings[l], "-"+sh)
		}
	}
	return longs, spellings
}

func writeBash(w io.Writer, specs []completionSpec) error {
	var b strings.Builder
	b.WriteString("# bash completion for ledger (generated by `ledger completion bash`)\n_ledger() {\n")
	b.WriteString("\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmd=\"${COMP_WORDS[1]}\" words=\"\" args=\"\" inner=\"\" i\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W \"help --version %s\" -- \"$cur\"))\n\t\treturn\n\tfi\n", specNames(specs))
	fmt.Fprintf(&b, "\tif [ \"$cmd\" = at ]; then\n\t\tfor ((i = 2; i < COMP_CWORD; i++)); do\n\t\t\tcase \"${COMP_WORDS[i]}\" in %s) inner=\"${COMP_WORDS[i]}\" ;; esac\n\t\tdone\n\tfi\n", strings.Join(atQueryNames, "|"))
	// A flag's value.
	b.WriteString("\tcase \"$cmd:$prev\" in\n")
	for _, s := range specs {
		longs, sp := valueFlags(s)
		for _, l := range longs {
			pats := make([]string, len(sp[l]))
			for i, x := range sp[l] {
				pats[i] = s.name + ":" + x
			}
			fmt.Fprintf(&b, "\t%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", strings.Join(pats, "|"), strings.Join(s.values[l], " "))
		}
	}
	b.WriteString("\tesac\n\tcase \"$cmd\" in\n")
	fmt.Fprintf(&b, "\thelp) args=\"%s\" ;;\n", specNames(specs))
	for _, s := range specs {
		a := strings.Join(s.args, " ")
		if s.ids {
			a = "$(" + idsCommand + ")"
		}
		fmt.Fprintf(&b, "\t%s) words=\"%s\" args=\"%s\" ;;\n", s.name, dashed(s.flags), a)
	}
	b.WriteString("\tesac\n")
	// at's query: its own flags after it.
	b.WriteString("\tif [ -n \"$inner\" ]; then\n\t\targs=\"\"\n\t\tcase \"$inner\" in\n")
	for _, s := range specs {
		for _, q := range sortedKeys(s.inner) {
			fmt.Fprintf(&b, "\t\t%s) words=\"--help %s\" ;;\n", q, dashed(s.inner[q]))
		}
	}
	b.WriteString("\t\t*) words=\"--help\" ;;\n\t\tesac\n\tfi\n")
	b.WriteString("\tif [[ \"$cur\" == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n" +
		"\telif [ -n \"$args\" ]; then\n\t\tCOMPREPLY=($(compgen -W \"$args\" -- \"$cur\"))\n" +
		"\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\n")
	b.WriteString("complete -o default -F _ledger ledger\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func writeZsh(w io.Writer, specs []completionSpec) error {
	var b strings.Builder
	b.WriteString("#compdef ledger\n# zsh completion for ledger (generated by `ledger completion zsh`)\n_ledger() {\n\tlocal -a cmds flags args\n\tcmds=(\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "\t\t%s\n", zshQuote(s.name+":"+s.short))
	}
	b.WriteString("\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe 'command' cmds\n\t\tcompadd -- --version\n\t\treturn\n\tfi\n")
	b.WriteString("\tlocal cmd=$words[2] prev=$words[CURRENT-1] inner= i\n")
	fmt.Fprintf(&b, "\tif [[ $cmd == at ]]; then\n\t\tfor (( i = 3; i < CURRENT; i++ )); do\n\t\t\tcase $words[i] in (%s) inner=$words[i] ;; esac\n\t\tdone\n\tfi\n", strings.Join(atQueryNames, "|"))
	b.WriteString("\tcase \"$cmd:$prev\" in\n")
	for _, s := range specs {
		longs, sp := valueFlags(s)
		for _, l := range longs {
			pats := make([]string, len(sp[l]))
			for i, x := range sp[l] {
				pats[i] = s.name + ":" + x
			}
			fmt.Fprintf(&b, "\t(%s) compadd -- %s; return ;;\n", strings.Join(pats, "|"), strings.Join(s.values[l], " "))
		}
	}
	b.WriteString("\tesac\n\tcase $cmd in\n")
	fmt.Fprintf(&b, "\t(help) args=(%s) ;;\n", specNames(specs))
	for _, s := range specs {
		a := strings.Join(s.args, " ")
		if s.ids {
			a = "${(f)\"$(" + idsCommand + ")\"}"
		}
		fmt.Fprintf(&b, "\t(%s) flags=(%s); args=(%s) ;;\n", s.name, dashed(s.flags), a)
	}
	b.WriteString("\tesac\n\tif [[ -n $inner ]]; then\n\t\targs=()\n\t\tcase $inner in\n")
	for _, s := range specs {
		for _, q := range sortedKeys(s.inner) {
			fmt.Fprintf(&b, "\t\t(%s) flags=(--help %s) ;;\n", q, dashed(s.inner[q]))
		}
	}
	b.WriteString("\t\t(*) flags=(--help) ;;\n\t\tesac\n\tfi\n")
	b.WriteString("\tif [[ $PREFIX == -* ]]; then\n\t\tcompadd -- $flags\n\telif (( $#args )); then\n\t\tcompadd -- $args\n\telse\n\t\t_files\n\tfi\n}\ncompdef _ledger ledger\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeFish(w io.Writer, specs []completionSpec) error {
	var b strings.Builder
	b.WriteString("# fish completion for ledger (generated by `ledger completion fish`)\ncomplete -c ledger -f\n")
	b.WriteString("complete -c ledger -n __fish_use_subcommand -l version -d 'print the version'\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "complete -c ledger -n __fish_use_subcommand -a %s -d %s\n", s.name, zshQuote(s.short))
	}
	fmt.Fprintf(&b, "complete -c ledger -n '__fish_seen_subcommand_from help' -a %s\n", zshQuote(specNames(specs)))
	queries := strings.Join(atQueryNames, " ")
	for _, s := range specs {
		shortOf := map[string]string{}
		for sh, l := range s.shorts {
			shortOf[l] = sh
		}
		cond := "__fish_seen_subcommand_from " + s.name
		if s.inner != nil {
			cond += "; and not __fish_seen_subcommand_from " + queries
		}
		for _, f := range s.flags {
			line := fmt.Sprintf("complete -c ledger -n %s -l %s", zshQuote(cond), f)
			if sh, ok := shortOf[f]; ok {
				line += " -s " + sh
			}
			if v, ok := s.values[f]; ok {
				line += " -x -a " + zshQuote(strings.Join(v, " "))
			}
			b.WriteString(line + "\n")
		}
		if len(s.args) > 0 {
			fmt.Fprintf(&b, "complete -c ledger -n %s -a %s\n", zshQuote(cond), zshQuote(strings.Join(s.args, " ")))
		}
		if s.ids {
			// fish fails a substitution of a command it cannot find: ask only when ledger is on PATH.
			fmt.Fprintf(&b, "complete -c ledger -n %s -a %s\n", zshQuote(cond), zshQuote("(command -q ledger; and "+idsCommand+")"))
		}
		for _, q := range sortedKeys(s.inner) {
			for _, f := range s.inner[q] {
				line := fmt.Sprintf("complete -c ledger -n %s -l %s", zshQuote("__fish_seen_subcommand_from "+s.name+"; and __fish_seen_subcommand_from "+q), f)
				if v, ok := s.values[f]; ok {
					line += " -x -a " + zshQuote(strings.Join(v, " "))
				}
				b.WriteString(line + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
