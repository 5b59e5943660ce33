package main

import "strings"

// listValue is a repeatable string flag: each use adds a value; the
// environment default (LEDGER_<NAME>) holds values separated by commas,
// and a use on the command line replaces it.
type listValue struct {
	p       *[]string
	fromEnv bool
}

func (l *listValue) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *listValue) Set(v string) error {
	if l.fromEnv {
		*l.p, l.fromEnv = nil, false
	}
	*l.p = append(*l.p, strings.TrimSpace(v))
	return nil
}

// list registers a repeatable string flag; env says whether it reads
// LEDGER_<NAME> (comma-separated values).
func (f *flags) list(p *[]string, name, meta, usage string, env bool) {
	lv := &listValue{p: p}
	if v, ok := f.lookup(name, env); ok {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*p = append(*p, s)
			}
		}
		lv.fromEnv = true
	}
	f.meta[name] = meta
	f.fs.Var(lv, name, usage)
}
