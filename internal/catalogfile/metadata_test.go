package catalogfile

import (
	"encoding/json"
	"testing"
)

// A customer's metadata goes from a file to a JSON object and back with
// its numbers' digits.
func TestMetadataObject(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantJSON string // "null" for no metadata
		wantYAML string // the entry as Encode writes it back
	}{
		{
			name:     "numbers keep their digits",
			yaml:     "{ratio: 1.50, big: 12345678901234567890, list: [2.50, -0, x, true, null]}",
			wantJSON: `{"big":12345678901234567890,"list":[2.50,-0,"x",true,null],"ratio":1.50}`,
			wantYAML: "customers:\n  acme:\n    plan: pro\n    metadata:\n      big: 12345678901234567890\n" +
				"      list:\n        - 2.50\n        - -0\n        - x\n        - true\n        - null\n      ratio: 1.50\n",
		},
		{
			name:     "nested",
			yaml:     "{a: {b: {c: 1}}}",
			wantJSON: `{"a":{"b":{"c":1}}}`,
			wantYAML: "customers:\n  acme:\n    plan: pro\n    metadata:\n      a:\n        b:\n          c: 1\n",
		},
		{name: "empty", yaml: "{}", wantJSON: "null", wantYAML: "customers:\n  acme:\n    plan: pro\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Parse("catalog.yaml", []byte("customers:\n  acme:\n    plan: pro\n    metadata: "+tt.yaml+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			obj, err := doc.File.Customers["acme"].MetadataObject()
			if err != nil {
				t.Fatal(err)
			}
			if len(obj) == 0 {
				obj = nil
			}
			if b, err := json.Marshal(obj); err != nil || string(b) != tt.wantJSON {
				t.Errorf("MetadataObject = %s (%v), want %s", b, err, tt.wantJSON)
			}

			back := &Customer{Plan: ptr("pro")}
			if err := back.SetMetadataObject(obj); err != nil {
				t.Fatal(err)
			}
			out, err := Encode(&File{Customers: map[string]*Customer{"acme": back}})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.wantYAML {
				t.Errorf("SetMetadataObject, then Encode wrote\n%s\nwant\n%s", out, tt.wantYAML)
			}
		})
	}
}

// plainDecimal writes numbers as PostgreSQL answers them from a jsonb
// column; the wants are PostgreSQL 15's answers to
// ('{"a":'||x||'}')::jsonb->>'a'.
func TestPlainDecimal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1e-7", "0.0000001"},
		{"1.50e1", "15.0"},
		{"1.5E3", "1500"},
		{"-2e0", "-2"},
		{"0e5", "0"},
		{"-0.0e-2", "0.000"},
		{"12.345e-2", "0.12345"},
		{"1e2", "100"},
		{"1.0e-1", "0.10"},
		{"5e+1", "50"},
		{"-1.25e1", "-12.5"},
		{"1.50", "1.50"},
		{"12345678901234567890", "12345678901234567890"},
		{"1e1001", "1e1001"},
	} {
		if got := plainDecimal(tc.in); got != tc.want {
			t.Errorf("plainDecimal(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
