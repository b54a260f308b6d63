// Package house holds tests of the tree's shape rather than of its
// behaviour: rules a reviewer would otherwise have to check by eye.
package house

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxMethods is how many methods a type may have: past it, a type does
// several jobs, and its consumers cannot see which of them they use.
const maxMethods = 30

// TestTypesStaySmall counts the methods of every type of the module and
// of the client's, tests left out, and fails for a type with more than
// maxMethods.
func TestTypesStaySmall(t *testing.T) {
	counts, err := methodCounts("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 100 {
		t.Fatalf("found the methods of %d types: the walk missed the tree", len(counts))
	}
	var big []string
	for typ, n := range counts {
		if n > maxMethods {
			big = append(big, fmt.Sprintf("%s: %d methods", typ, n))
		}
	}
	slices.Sort(big)
	for _, b := range big {
		t.Errorf("%s, more than %d: split it by what its consumers use", b, maxMethods)
	}
}

// methodCounts returns, for each type of the Go files below root (not
// tests, not testdata or node_modules), "dir.Type" with dir relative to
// root, how many methods it has.
func methodCounts(root string) (map[string]int, error) {
	counts := make(map[string]int)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			if name := receiver(fn.Recv.List[0].Type); name != "" {
				dir, err := filepath.Rel(root, filepath.Dir(path))
				if err != nil {
					return err
				}
				counts[filepath.ToSlash(dir)+"."+name]++
			}
		}
		return nil
	})
	return counts, err
}

// receiver returns the name of a method's receiver type: T of T, *T, T[P]
// or *T[P].
func receiver(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// The walk counts what it should: a type's methods across files, through
// pointer and generic receivers.
func TestMethodCounts(t *testing.T) {
	counts, err := methodCounts("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"a.T": 3, "a.G": 2, "b.T": 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d methods, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}
