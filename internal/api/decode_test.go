package api

import (
	"errors"
	"mime"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// requestTypes are the types request bodies decode into.
var requestTypes = []any{
	checkRequest{}, refundRequest{},
	tiers.MetricSpec{}, tiers.PlanSpec{}, tiers.CustomerSpec{}, tiers.OverrideSpec{},
}

// Field names are lower-case ASCII, as openapi.yaml spells them: no key a
// client sends can name a field only under case folding without being
// refused as unknown, and the fast check decoder can compare keys as bytes.
func TestRequestFieldNamesAreLowerCaseASCII(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(t *testing.T, typ reflect.Type, path string)
	walk = func(t *testing.T, typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeFor[time.Time]() {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name == "-" {
				continue
			}
			if f.Anonymous {
				t.Errorf("%s.%s: embedded fields are not named exactly by their tag", path, f.Name)
			}
			for _, c := range []byte(name) {
				if c >= 0x80 || ('A' <= c && c <= 'Z') {
					t.Errorf("%s.%s: JSON name %q is not lower-case ASCII", path, f.Name, name)
					break
				}
			}
			walk(t, f.Type, path+"."+name)
		}
	}
	for _, v := range requestTypes {
		walk(t, reflect.TypeOf(v), reflect.TypeOf(v).String())
	}
}

// Keys are matched exactly: encoding/json would take "CUSTOMER" for
// "customer".
func TestDecodeMatchesKeysExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		dst   func() any
		field string // "" when the body must decode
	}{
		{"check, exact", `{"customer":"ACME","metric":"api_calls","cost":2}`, func() any { return &checkRequest{} }, ""},
		{"check, escaped exact key", `{"customer":"acme","metric":"api_calls","\u0063ost":2}`, func() any { return &checkRequest{} }, ""},
		{"check, upper-case key", `{"CUSTOMER":"acme","metric":"api_calls"}`, func() any { return &checkRequest{} }, "CUSTOMER"},
		{"check, mixed-case key", `{"customer":"acme","Metric":"api_calls"}`, func() any { return &checkRequest{} }, "Metric"},
		{"check, long s", "{\"customer\":\"acme\",\"metric\":\"m\",\"co\u017ft\":7}", func() any { return &checkRequest{} }, "co\u017ft"},
		{"refund, upper-case key", `{"customer":"acme","metric":"m","Request_ID":"x"}`, func() any { return &refundRequest{} }, "Request_ID"},
		{"plan, nested key", `{"name":"Pro","limits":[{"metric":"m","window":"day","Limit":1}]}`, func() any { return &tiers.PlanSpec{} }, "limits[0].Limit"},
		{"plan, price key", `{"name":"Pro","price":{"Currency":"USD"}}`, func() any { return &tiers.PlanSpec{} }, "price.Currency"},
		{"customer, metadata keys are free", `{"plan":"pro","metadata":{"Team":"Core"}}`, func() any { return &tiers.CustomerSpec{} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustDecodeAs(t, tc.body, tc.dst(), tc.field, "")
		})
	}
}

// A null or a repeated key is a mistake to report, not a default to guess:
// null only where a field is nullable (so that a GET answer can be PUT
// back), and a key at most once per object, metadata included.
func TestDecodeRefusesNullsAndRepeatedKeys(t *testing.T) {
	check := func() any { return &checkRequest{} }
	refund := func() any { return &refundRequest{} }
	metric := func() any { return &tiers.MetricSpec{} }
	plan := func() any { return &tiers.PlanSpec{} }
	customer := func() any { return &tiers.CustomerSpec{} }
	override := func() any { return &tiers.OverrideSpec{} }
	const (
		null = "must not be null"
		dup  = "appears more than once"
	)
	for _, tc := range []struct {
		name    string
		body    string
		dst     func() any
		field   string // "" when the body must decode
		message string
	}{
		{"check, null cost", `{"customer":"acme","metric":"m","cost":null}`, check, "cost", null},
		{"check, null dry_run", `{"customer":"acme","metric":"m","dry_run":null}`, check, "dry_run", null},
		{"check, null request_id", `{"customer":"acme","metric":"m","request_id":null}`, check, "request_id", null},
		{"check, null customer", `{"customer":null,"metric":"m"}`, check, "customer", null},
		{"check, null metric", `{"customer":"acme","metric":null}`, check, "metric", null},
		{"check, repeated cost", `{"customer":"acme","metric":"m","cost":1,"cost":2}`, check, "cost", dup},
		{"check, repeated cost, same value", `{"customer":"acme","metric":"m","cost":1,"cost":1}`, check, "cost", dup},
		{"check, repeated customer", `{"customer":"acme","customer":"evil","metric":"m"}`, check, "customer", dup},
		{"check, repeated key spelled with an escape", `{"customer":"acme","metric":"m","cost":1,"\u0063ost":2}`, check, "cost", dup},
		{"check, the first problem wins", `{"customer":"acme","cost":null,"cost":2,"metric":null}`, check, "cost", null},
		{"check, a repeated key before a wrong type", `{"customer":"acme","customer":"b","cost":"x"}`, check, "customer", dup},
		{"check, a wrong type before a repeated key", `{"customer":"acme","cost":"x","customer":"b"}`, check, "cost", "must be an integer"},
		{"check, invalid JSON after a repeated key", `{"cost":1,"cost":2,x}`, check, "", "the request body is not valid JSON (at byte 20)"},
		{"check, invalid JSON after a wrong type", `{"cost":"x","customer":"a"`, check, "", "the request body is not valid JSON (it ends early)"},
		{"check, invalid JSON after an unknown key", `{"weight":1,}`, check, "", "the request body is not valid JSON (at byte 13)"},
		{"refund, null cost", `{"customer":"acme","metric":"m","cost":null}`, refund, "cost", null},
		{"refund, null request_id", `{"customer":"acme","metric":"m","request_id":null}`, refund, "request_id", null},
		{"refund, repeated request_id", `{"customer":"acme","metric":"m","request_id":"a","request_id":"b"}`, refund, "request_id", dup},

		{"metric, nulls where nullable", `{"description":null,"capacity":null}`, metric, "", ""},
		{"metric, null capacity entry", `{"capacity":{"day":null}}`, metric, "capacity.day", null},
		{"metric, null capacity entry named by digits", `{"capacity":{"1":null}}`, metric, "capacity.1", null},
		{"metric, repeated capacity window", `{"capacity":{"day":1,"day":2}}`, metric, "capacity.day", dup},
		{"metric, repeated description", `{"description":"a","description":"b"}`, metric, "description", dup},
		{"metric, null credit schema", `{"credit_schema":null}`, metric, "", ""},
		{"metric, null credit rate per", `{"credit_schema":[{"metric":"m","credits":1,"per":null}]}`, metric, "", ""},
		{"metric, null credit rate", `{"credit_schema":[{"metric":"m","credits":1},null]}`, metric, "credit_schema[1]", null},
		{"metric, null credit rate metric", `{"credit_schema":[{"metric":null,"credits":1}]}`, metric, "credit_schema[0].metric", null},
		{"metric, null credits", `{"credit_schema":[{"metric":"m","credits":null}]}`, metric, "credit_schema[0].credits", null},
		{"metric, repeated credits", `{"credit_schema":[{"metric":"m","credits":1,"credits":2}]}`, metric, "credit_schema[0].credits", dup},
		{"metric, fractional credits", `{"credit_schema":[{"metric":"m","credits":1.5}]}`, metric, "credit_schema[0].credits", "must be an integer"},
		{"metric, unknown credit rate field", `{"credit_schema":[{"metric":"m","credits":1,"pool":"p"}]}`, metric, "credit_schema[0].pool", "is not a known field"},
		{"metric, credit schema not a list", `{"credit_schema":{"metric":"m"}}`, metric, "credit_schema", "must be a JSON array"},

		{"plan, nulls where nullable", `{"name":null,"description":null,"price":null,"limits":null}`, plan, "", ""},
		{"plan, nullable price fields", `{"price":{"amount_cents":null,"currency":null,"interval":null}}`, plan, "", ""},
		{"plan, nullable limit fields", `{"limits":[{"metric":"m","window":"day","limit":1,"mode":null,"overage_percent":null,"overage_price_micros":null,"ceiling":null}]}`, plan, "", ""},
		{"plan, null limit entry", `{"limits":[{"metric":"m","window":"day","limit":1},null]}`, plan, "limits[1]", null},
		{"plan, null first limit entry", `{"limits":[null]}`, plan, "limits[0]", null},
		{"plan, null limit", `{"limits":[{"metric":"m","window":"day","limit":null}]}`, plan, "limits[0].limit", null},
		{"plan, null limit metric", `{"limits":[{"metric":null,"window":"day","limit":1}]}`, plan, "limits[0].metric", null},
		{"plan, null limit window", `{"limits":[{"metric":"m","window":null,"limit":1}]}`, plan, "limits[0].window", null},
		{"plan, null limit per", `{"limits":[{"metric":"m","window":"day","limit":1,"per":null}]}`, plan, "", ""},
		{"plan, repeated limit per", `{"limits":[{"metric":"m","window":"day","limit":1,"per":"subject","per":"customer"}]}`, plan, "limits[0].per", dup},
		{"plan, limit per not a string", `{"limits":[{"metric":"m","window":"day","limit":1,"per":1}]}`, plan, "limits[0].per", "must be a string"},
		{"plan, repeated name", `{"name":"a","name":"b"}`, plan, "name", dup},
		{"plan, repeated limits", `{"limits":[],"limits":[]}`, plan, "limits", dup},
		{"plan, repeated limit mode", `{"limits":[{"metric":"m","window":"day","limit":1},{"metric":"m","window":"hour","limit":1,"mode":"soft","mode":"hard"}]}`, plan, "limits[1].mode", dup},
		{"plan, repeated price currency", `{"price":{"currency":"USD","currency":"EUR"}}`, plan, "price.currency", dup},
		{"plan, repeated price", `{"price":{},"price":{}}`, plan, "price", dup},

		{"customer, nulls where nullable", `{"plan":"pro","name":null,"billing_anchor_day":null,"metadata":null}`, customer, "", ""},
		{"customer, nulls inside metadata", `{"plan":"pro","metadata":{"a":null,"b":[null,{"c":null}]}}`, customer, "", ""},
		{"customer, the same key in two metadata objects", `{"plan":"pro","metadata":{"a":{"k":1},"b":{"k":2},"k":3}}`, customer, "", ""},
		{"customer, null plan", `{"plan":null}`, customer, "plan", null},
		{"customer, repeated plan", `{"plan":"pro","plan":"free"}`, customer, "plan", dup},
		{"customer, repeated metadata key", `{"plan":"pro","metadata":{"a":1,"a":2}}`, customer, "metadata.a", dup},
		{"customer, repeated nested metadata key", `{"plan":"pro","metadata":{"a":{"b":1,"c":2,"b":3}}}`, customer, "metadata.a.b", dup},
		{"customer, repeated metadata key in an array", `{"plan":"pro","metadata":{"list":[{"x":1},{"y":1,"y":2}]}}`, customer, "metadata.list[1].y", dup},
		{"customer, repeated metadata key named by digits", `{"plan":"pro","metadata":{"0":[{"1":1,"1":2}]}}`, customer, "metadata.0[0].1", dup},
		{"customer, repeated metadata key spelled with an escape", `{"plan":"pro","metadata":{"Team":1,"\u0054eam":2}}`, customer, "metadata.Team", dup},
		{"customer, repeated metadata", `{"plan":"pro","metadata":{},"metadata":{}}`, customer, "metadata", dup},

		{"override, nulls where nullable", `{"limit":1,"mode":null,"overage_percent":null,"overage_price_micros":null,"ceiling":null,"expires_at":null,"reason":null}`, override, "", ""},
		{"override, null limit", `{"limit":null}`, override, "limit", null},
		{"override, null per", `{"limit":1,"per":null}`, override, "", ""},
		{"override, repeated per", `{"limit":1,"per":"subject","per":"customer"}`, override, "per", dup},
		{"override, a repeated key inside a limit that is not a number", `{"limit":[{"a":1,"a":2}]}`, override, "limit", "must be an integer"},
		{"override, a repeated key inside a time", `{"limit":1,"expires_at":{"a":1,"a":2}}`, override, "expires_at", "must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"},
		{"override, a time with a comma", `{"limit":1,"expires_at":"2030-01-01T00:00:00,5Z"}`, override, "expires_at", "must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"},
		{"override, repeated limit", `{"limit":1,"limit":1000}`, override, "limit", dup},
		{"override, repeated expires_at", `{"limit":1,"expires_at":"2030-01-01T00:00:00Z","expires_at":"2031-01-01T00:00:00Z"}`, override, "expires_at", dup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustDecodeAs(t, tc.body, tc.dst(), tc.field, tc.message)
		})
	}
}

// mustDecodeAs decodes body into dst: without an error when field and
// message are "", else with a 400 that has one entry naming field (the
// body when "") and saying message, unless that is "".
func mustDecodeAs(t *testing.T, body string, dst any, field, message string) {
	t.Helper()
	err := decodeJSON([]byte(body), dst)
	if field == "" && message == "" {
		if err != nil {
			t.Fatalf("decode: %v, want no error", err)
		}
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		t.Fatalf("decode: %v, want a client error naming %q", err, field)
	}
	if ae.status != 400 || len(ae.fields) != 1 || ae.fields[0].Field != field ||
		(message != "" && ae.fields[0].Message != message) {
		t.Errorf("decode error = %d %+v, want 400 with one entry naming %q (%q)", ae.status, ae.fields, field, message)
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"Application/JSON":                  true,
		"APPLICATION/JSON":                  true,
		"application/j\u017fon":             false, // strings.EqualFold folds ſ to s; ParseMediaType refuses it
		"application/json; charset=utf-8":   true,
		"application/json;charset=UTF-8":    true,
		"application/json ":                 true,
		" application/json":                 true,
		"":                                  false,
		"application/json; =":               false,
		"application/jsonx":                 false,
		"application/problem+json":          false,
		"text/plain":                        false,
		"application/json, text/plain":      false,
		"application/x-www-form-urlencoded": false,
	} {
		got := isJSON(ct)
		if got != want {
			t.Errorf("isJSON(%q) = %v, want %v", ct, got, want)
		}
		// The shortcut for a bare type takes what ParseMediaType takes.
		mt, _, err := mime.ParseMediaType(ct)
		if parsed := err == nil && mt == "application/json"; parsed != got {
			t.Errorf("isJSON(%q) = %v, but ParseMediaType says %v", ct, got, parsed)
		}
	}
}
