package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestAnomalyNamesComplete parses the package's sources and checks that
// AnomalyNames holds the value of every Anomaly* string constant, once.
func TestAnomalyNamesComplete(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var consts []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Anomaly") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					consts = append(consts, v)
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatal("no Anomaly* constants found")
	}
	for _, c := range consts {
		if !slices.Contains(AnomalyNames, c) {
			t.Errorf("AnomalyNames lacks %q", c)
		}
	}
	if len(AnomalyNames) != len(consts) {
		t.Errorf("AnomalyNames has %d names, the package %d Anomaly* constants", len(AnomalyNames), len(consts))
	}
}
