package api

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The routes a check token may call are the ones openapi.yaml says: the
// list in the bearerAuth scheme's description, and the operations whose
// x-quotad-roles admit "check", are exactly checkRoutes.
func TestCheckTokenRoutesMatchOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for route := range checkRoutes {
		method, path, _ := strings.Cut(route, " ")
		path = regexp.MustCompile(`:([a-z_]+)`).ReplaceAllString(path, "{$1}")
		path = strings.Replace(path, "/*", "/{path}", 1) // the forward-auth wildcard, as openapi.yaml names it
		want = append(want, method+" "+path)
	}
	slices.Sort(want)

	scheme := doc.Components.SecuritySchemes["bearerAuth"]
	if scheme == nil || scheme.Value == nil {
		t.Fatal("openapi.yaml has no bearerAuth scheme")
	}
	var described []string
	for _, m := range regexp.MustCompile("(?m)^- `([A-Z, ]+) (/[^`]*)`$").FindAllStringSubmatch(scheme.Value.Description, -1) {
		for _, method := range strings.Split(m[1], ", ") {
			described = append(described, method+" "+m[2])
		}
	}
	slices.Sort(described)
	if !slices.Equal(described, want) {
		t.Errorf("bearerAuth's description lists for a check token\n%q\nauth.go allows\n%q", described, want)
	}

	var roles []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			list, _ := op.Extensions["x-quotad-roles"].([]any)
			for _, r := range list {
				if r == "check" {
					roles = append(roles, method+" "+path)
				}
			}
		}
	}
	slices.Sort(roles)
	if !slices.Equal(roles, want) {
		t.Errorf("x-quotad-roles admit a check token on\n%q\nauth.go allows\n%q", roles, want)
	}
}
