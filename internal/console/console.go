// Package console is quotad's admin console: a static page and its
// scripts and styles, embedded in the binary and served at /console/. The
// page holds no data of its own: it calls the public REST API with the
// admin token the admin types in, so the API's own authentication guards
// every datum, and the static files need no token.
//
// The files are plain HTML, CSS and JavaScript ES modules, with no build
// step and no third-party code; the handler sends them with a strict
// Content-Security-Policy (scripts and styles from this origin only, no
// inline script or style, no framing).
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: only this
// origin's scripts, styles and API, nothing inline, no plugins, no framing,
// no form posted anywhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// FS returns the console's files, index.html at the root.
func FS() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above: it exists
	}
	return sub
}

// Handler serves the console's files under Prefix, each with the security
// headers. Requests outside Prefix are answered 404.
func Handler() http.Handler {
	files := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// The files change with the binary: revalidate on every load
		// rather than run a stale script against a newer API.
		h.Set("Cache-Control", "no-cache")
		rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok || strings.HasSuffix(rest, "/") && rest != "" {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		r2.URL.RawPath = ""
		files.ServeHTTP(w, r2)
	})
}
