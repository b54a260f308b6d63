package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/console"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	h := console.Handler()
	tests := []struct {
		name, path  string
		want        int
		contentType string
		body        string
	}{
		{"the page", "/console/", http.StatusOK, "text/html", `<script type="module" src="js/app.js">`},
		{"a module", "/console/js/api.js", http.StatusOK, "text/javascript", "sessionStorage"},
		{"the styles", "/console/app.css", http.StatusOK, "text/css", ":root"},
		{"the icon", "/console/favicon.svg", http.StatusOK, "image/svg+xml", "<svg"},
		{"index.html goes to the page", "/console/index.html", http.StatusMovedPermanently, "", ""},
		{"no such file", "/console/secret.txt", http.StatusNotFound, "", ""},
		{"no directory listing", "/console/js/", http.StatusNotFound, "", ""},
		{"outside the prefix", "/v1/customers", http.StatusNotFound, "", ""},
		{"no way out of the files", "/console/../console.go", http.StatusNotFound, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.URL.Path = tt.path // unclean on purpose: as a raw request could send it
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d", rec.Code, tt.want)
			}
			if got := rec.Header().Get("Content-Security-Policy"); got != console.CSP {
				t.Errorf("CSP %q, want %q", got, console.CSP)
			}
			for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
				if got := rec.Header().Get(name); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
			if tt.contentType != "" && !strings.HasPrefix(rec.Header().Get("Content-Type"), tt.contentType) {
				t.Errorf("Content-Type %q, want %s", rec.Header().Get("Content-Type"), tt.contentType)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body lacks %q", tt.body)
			}
		})
	}
}

// No file of the console writes HTML from a string or runs a string as code.
func TestAssetsInsertNoMarkup(t *testing.T) {
	t.Parallel()
	err := fs.WalkDir(console.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.FS(), path)
		if err != nil {
			return err
		}
		// The SVG namespace is a name, not an address fetched.
		text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://", "localStorage", "document.cookie"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
