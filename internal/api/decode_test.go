package api

import (
	"errors"
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

// foldableKeys lets bodies whose keys are lower-case ASCII skip the exact
// key check; that is only sound while every field is named in lower case.
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

func TestFoldableKeys(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"customer":"acme","metric":"api_calls","cost":1}`, false},
		{`{"customer":"ACME","metric":"api_calls"}`, false}, // upper case in a value only
		{`{"customer":"a\":\"B","metric":"m"}`, false},      // an escaped quote in a value
		{`{"name":"Pro","limits":[{"metric":"m","window":"day"}]}`, false},
		{`{"CUSTOMER":"acme"}`, true},
		{`{"customer":"acme", "Cost" : 1}`, true},
		{"{\"co\u017ft\":1}", true}, // LATIN SMALL LETTER LONG S folds to s
		{`{"\u0063ost":1}`, true},   // an escape: decoded, it may name a field exactly
		{`{"metadata":{"Team":"x"}}`, true},
		{`{"a":["B",{"c":"D"}]}`, false},
	} {
		if got := foldableKeys([]byte(tc.body)); got != tc.want {
			t.Errorf("foldableKeys(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// Keys are matched exactly: encoding/json alone would take "CUSTOMER" for
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
			err := decodeJSON([]byte(tc.body), tc.dst())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("decode: %v, want no error", err)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("decode: %v, want a client error naming %q", err, tc.field)
			}
			if ae.status != 400 || len(ae.fields) != 1 || ae.fields[0].Field != tc.field {
				t.Errorf("decode error = %d %+v, want 400 with one entry naming %q", ae.status, ae.fields, tc.field)
			}
		})
	}
}
