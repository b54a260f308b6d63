package catalogfile

import (
	"os"
	"testing"
)

// FuzzParse: no file makes parsing or validation panic, and a file that
// validates exports to one that reads back with nothing to change.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(have))
	f.Add([]byte(want))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse("fuzz.yaml", data)
		if err != nil {
			if _, ok := err.(Errors); !ok {
				t.Fatalf("Parse: %T %v, want Errors", err, err)
			}
			return
		}
		c, err := Validate(doc, serverCatalog, now)
		if err != nil {
			return
		}
		out, err := Encode(Export(c, true))
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, err := Parse("export.yaml", out)
		if err != nil {
			t.Fatalf("export of\n%s\ndoes not parse: %v\n%s", data, err, out)
		}
		bc, err := Validate(back, serverCatalog, now)
		if err != nil {
			t.Fatalf("export of\n%s\ndoes not validate: %v\n%s", data, err, out)
		}
		if changes := Diff(bc, c, nil, true); len(changes) != 0 {
			t.Fatalf("export of\n%s\nreads back with changes %+v:\n%s", data, changes, out)
		}
	})
}
