package simulate

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// checkSVG fails unless b is well-formed XML, an svg document whose text
// names each of names.
func checkSVG(t *testing.T, b []byte, names ...string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var root string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, n := range names {
		if !strings.Contains(text.String(), n) {
			t.Errorf("the SVG names no %q; its text:\n%s", n, text.String())
		}
	}
}

func TestChartSVG(t *testing.T) {
	c := &Chart{Customer: "acme", Start: 0, Bucket: 2000, Window: 1000, Limit: 3,
		Names: []string{Exact, "sliding_window"}, Peaks: [][]int64{{3, 3, 0}, {3, 4, 1}}}
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes(), "acme", "limit (3)", Exact, "sliding_window", "2 seconds")
}
