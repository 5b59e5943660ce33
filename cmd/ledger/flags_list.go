package main

import (
	"os"
	"strings"
)

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
	f.listEnv(p, name, meta, usage, env, "")
}

// listEnv is list reading the variable envVar instead of LEDGER_<NAME>
// when it is not "".
func (f *flags) listEnv(p *[]string, name, meta, usage string, env bool, envVar string) {
	lv := &listValue{p: p}
	v, ok := f.lookup(name, env)
	if env && envVar != "" {
		f.env[name] = envVar
		v, ok = os.LookupEnv(envVar)
		ok = ok && v != ""
	}
	if ok {
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
