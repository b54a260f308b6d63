package api

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
	"github.com/quotad/quotad/internal/whatif"
)

// bodyTypes are the Go types the request bodies decode into, by operation.
var bodyTypes = map[string]reflect.Type{
	"POST /v1/check":                                           reflect.TypeFor[checkRequest](),
	"POST /v1/refund":                                          reflect.TypeFor[refundRequest](),
	"POST /v1/reservations":                                    reflect.TypeFor[reserveRequest](),
	"POST /v1/reservations/{id}/commit":                        reflect.TypeFor[commitRequest](),
	"PUT /v1/metrics/{metric}":                                 reflect.TypeFor[tiers.MetricSpec](),
	"PUT /v1/plans/{plan}":                                     reflect.TypeFor[tiers.PlanSpec](),
	"POST /v1/plans/{plan}/migrate":                            reflect.TypeFor[tiers.MigrationSpec](),
	"PUT /v1/customers/{customer}":                             reflect.TypeFor[tiers.CustomerSpec](),
	"PUT /v1/customers/{customer}/overrides/{metric}/{window}": reflect.TypeFor[tiers.OverrideSpec](),
	"PUT /v1/customers/{customer}/features/{feature}":          reflect.TypeFor[tiers.FeatureOverrideSpec](),
	"POST /v1/features/check":                                  reflect.TypeFor[featureCheckRequest](),
	"PUT /v1/webhooks/{webhook}":                               reflect.TypeFor[webhooks.Spec](),
	"POST /v1/customers/{customer}/keys":                       reflect.TypeFor[keys.Spec](),
	"PUT /v1/customers/{customer}/usage/{metric}/total":        reflect.TypeFor[totalRequest](),
	"POST /v1/customers/{customer}/grants":                     reflect.TypeFor[grants.Spec](),
	"POST /v1/what-if":                                         reflect.TypeFor[whatif.Spec](),
}

// The decoder admits null exactly where openapi.yaml says a request field is
// nullable: the fields tagged nullable:"true" are those its request schemas
// mark nullable: true, and every request field is named on both sides.
func TestNullableFieldsMatchOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil {
				ops = append(ops, method+" "+path)
			}
		}
	}
	sort.Strings(ops)
	if got, want := ops, slices.Sorted(maps.Keys(bodyTypes)); !slices.Equal(got, want) {
		t.Fatalf("operations with a request body: openapi.yaml has %q, the test knows %q", got, want)
	}
	for _, name := range ops {
		method, path, _ := strings.Cut(name, " ")
		mt := doc.Paths.Value(path).GetOperation(method).RequestBody.Value.Content.Get("application/json")
		if mt == nil {
			t.Errorf("%s: no application/json request body", name)
			continue
		}
		compareNullable(t, name, mt.Schema.Value, bodyTypes[name], "")
	}
}

// compareNullable walks the request schema s and the Go type typ together
// from path: the same fields on both sides, nullable on both or neither.
// Array elements and map values are never nullable in Go.
func compareNullable(t *testing.T, op string, s *openapi3.Schema, typ reflect.Type, path string) {
	t.Helper()
	// A property reads "allOf: [$ref], nullable: true" to make a shared
	// schema nullable.
	if len(s.Properties) == 0 && len(s.AllOf) == 1 {
		s = s.AllOf[0].Value
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == rawMessageType || typ == reflect.TypeFor[time.Time]():
		// Free-form JSON (metadata) or a scalar.
	case typ.Kind() == reflect.Slice:
		if !s.Type.Is("array") {
			t.Errorf("%s: %s is an array in Go, %v in openapi.yaml", op, path, s.Type)
			return
		}
		if s.Items.Value.Nullable {
			t.Errorf("%s: the items of %s are nullable in openapi.yaml, never in Go", op, path)
		}
		compareNullable(t, op, s.Items.Value, typ.Elem(), path+"[]")
	case typ.Kind() == reflect.Map:
		// capacity: the windows are properties in openapi.yaml.
		values := []*openapi3.Schema{}
		for _, p := range s.Properties {
			values = append(values, p.Value)
		}
		if s.AdditionalProperties.Schema != nil {
			values = append(values, s.AdditionalProperties.Schema.Value)
		}
		if !s.Type.Is("object") || len(values) == 0 {
			t.Errorf("%s: %s is a map in Go, not an object with typed values in openapi.yaml", op, path)
		}
		for _, v := range values {
			if v.Nullable {
				t.Errorf("%s: a value of %s is nullable in openapi.yaml, never in Go", op, path)
			}
			compareNullable(t, op, v, typ.Elem(), path+"{}")
		}
	case typ.Kind() == reflect.Struct:
		if !s.Type.Is("object") {
			t.Errorf("%s: %s is an object in Go, %v in openapi.yaml", op, path, s.Type)
			return
		}
		inGo := map[string]bool{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			sub := strings.TrimPrefix(path+"."+name, ".")
			inGo[name] = true
			p := s.Properties[name]
			if p == nil {
				t.Errorf("%s: the Go type has %s, openapi.yaml does not name it", op, sub)
				continue
			}
			if isNullable(f) != p.Value.Nullable {
				t.Errorf("%s: %s is tagged nullable in Go: %t, nullable in openapi.yaml: %t",
					op, sub, isNullable(f), p.Value.Nullable)
			}
			compareNullable(t, op, p.Value, f.Type, sub)
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if !inGo[name] {
				t.Errorf("%s: openapi.yaml names %s, the Go type has no such field",
					op, strings.TrimPrefix(path+"."+name, "."))
			}
		}
	}
}
