package api

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/quota"
)

// FuzzFastDecodeCall compares the fast check and refund decoder with the
// general one on arbitrary bodies: whatever the fast path accepts, the
// general decoder accepts too, to exactly the same call; whatever it
// declines, decodeCallBody answers as the general decoder does.
func FuzzFastDecodeCall(f *testing.F) {
	for _, body := range []string{
		`{"customer":"acme","metric":"api_calls","cost":1}`,
		`{"customer":"acme","metric":"api_calls","cost":3,"dry_run":true,"request_id":"req-1"}`,
		`{"customer":"acme","metric":"api_calls","cost":3,"request_id":"req-1"}`,
		` { "customer" : "acme" ,` + "\t\r\n" + `"metric":"m" } ` + "\n",
		`{}`, `{ }`, `{,}`, `{"customer":"a",}`, `{"customer":"a""metric":"m"}`, `{"customer" "a"}`,
		`{"customer":"a"}{}`, `{"customer":"a"} x`, `{"customer":"a"`, `{"customer":"a`, `{"customer`,
		`{"cost":0}`, `{"cost":-0}`, `{"cost":-1}`, `{"cost":00}`, `{"cost":01}`, `{"cost":-}`, `{"cost":-01}`,
		`{"cost":1.0}`, `{"cost":1.}`, `{"cost":1e0}`, `{"cost":1E3}`, `{"cost":1x}`, `{"cost":+1}`, `{"cost":"1"}`,
		`{"cost":9223372036854775807}`, `{"cost":9223372036854775808}`, `{"cost":-9223372036854775808}`,
		`{"cost":-9223372036854775809}`, `{"cost":99999999999999999999}`, `{"cost":1000000000000000000}`,
		`{"cost":true}`, `{"cost":null}`, `{"cost":1,"cost":1}`,
		`{"dry_run":true}`, `{"dry_run":false}`, `{"dry_run":tru}`, `{"dry_run":truex}`, `{"dry_run":1}`, `{"dry_run":null}`,
		`{"customer":null}`, `{"customer":1}`, `{"customer":"a","customer":"a"}`, `{"request_id":""}`,
		`{"Customer":"a"}`, `{"CUSTOMER":"a"}`, "{\"co\u017ft\":1}", `{"\u0063ost":1}`, `{"customer":"\u0061"}`,
		`{"customer":"a\"b"}`, `{"customer":"a\\b"}`, "{\"customer\":\"a\x00b\"}", "{\"customer\":\"a\x7fb\"}",
		`{"customer":"acmé","metric":"日本"}`, "{\"customer\":\"\xff\"}", "{\"customer\":\"\xed\xa0\x80\"}",
		"{\"customer\":\"a\u2028\"}", "\ufeff{}", "\x00{}", `[]`, `null`, ``, ` `,
		`{"customer":"` + strings.Repeat("c", 128) + `","metric":"` + strings.Repeat("m", 63) + `","request_id":"` + strings.Repeat("r", 200) + `"}`,
		`{"weight":1}`, `{"customer":"a","extra":{}}`,
		`{"api_key":"qk_x","metric":"m"}`, `{"api_key":"qk_x","customer":"a","metric":"m","cost":2,"request_id":"r"}`,
		`{"api_key":null}`, `{"api_key":""}`, `{"api_key":"a","api_key":"a"}`, `{"api_key":"qk\u005f"}`, `{"API_KEY":"a"}`,
		`{"customer":"a","metric":"m","subject":"u-1"}`, `{"subject":""}`, `{"subject":null}`, `{"subject":1}`, `{"subject":"a","subject":"a"}`,
		`{"customer":"a","items":[{"metric":"m"}]}`, `{"customer":"a","items":[ { "metric" : "m" , "cost" : 2 , "subject" : "s" } , {} ]}`,
		`{"items":[]}`, `{"items":[ ]}`, `{"items":[{}]}`, `{"items":[{},]}`, `{"items":[,{}]}`, `{"items":[{}}`, `{"items":[{}]]}`,
		`{"items":[{"metric":"m"}`, `{"items":[{"metric":"m"},{"metric":"m"}]}`, `{"items":[{"cost":-1}]}`, `{"items":[{"cost":null}]}`,
		`{"items":[null]}`, `{"items":null}`, `{"items":{}}`, `{"items":[[]]}`, `{"items":[{"Metric":"m"}]}`, `{"items":[{"weight":1}]}`,
		`{"items":[{"metric":"m","metric":"m"}]}`, `{"items":[{}],"items":[{}]}`, `{"items":[{}],"metric":""}`, `{"items":[{}],"metric":"m"}`,
		`{"items":[{}],"cost":1}`, `{"items":[{}],"subject":""}`, `{"items":[{}],"subject":"s"}`, `{"metric":"m","items":[{}]}`,
		`{"items":[{"subject":"\u0061"}]}`, `{"items":[{"metric":"m\"x"}]}`, "{\"items\":[{\"metric\":\"\xff\"}]}",
		`{"items":[{}],"dry_run":true,"request_id":"r"}`, `{"api_key":"k","items":[{"metric":"m"}]}`,
		`{"items":[{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]}`, `{"items":[{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}]}`,
	} {
		f.Add([]byte(body))
	}
	// The bodies of FuzzDecodeRequest's corpus, too.
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeRequest", "*"))
	for _, name := range files {
		if body, ok := readCorpusBody(f, name); ok {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, refund := range []bool{false, true} {
			compareFastDecode(t, body, refund)
		}
	})
}

func compareFastDecode(t *testing.T, body []byte, refund bool) {
	t.Helper()
	what := "check"
	if refund {
		what = "refund"
	}
	want, generalErr := decodeCallJSON(body, refund)
	fast, ok := fastDecodeCall(body, refund)
	switch {
	case ok && generalErr != nil:
		t.Fatalf("%s: the fast decoder takes %s, which decodeJSON refuses: %v", what, fuzzQuote(body), generalErr)
	case ok && !reflect.DeepEqual(fast, want):
		t.Fatalf("%s: for %s the fast decoder makes\n%#v\ndecodeJSON\n%#v", what, fuzzQuote(body), fast, want)
	}
	// What the handler gets: decodeJSON's answer, whichever path it takes.
	got, err := decodeCallBody(body, refund)
	if !reflect.DeepEqual(err, generalErr) || (err == nil && !reflect.DeepEqual(got, want)) {
		t.Fatalf("%s: for %s decodeCallBody gives %#v, %v; decodeJSON %#v, %v", what, fuzzQuote(body), got, err, want, generalErr)
	}
}

// readCorpusBody reads the body of a "go test fuzz v1" corpus file of one
// []byte argument.
func readCorpusBody(tb testing.TB, name string) ([]byte, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, false
	}
	quoted, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return []byte(s), true
}

// The fast path must take the bodies backends send, or it is no use.
func TestFastDecodeCallTakesUsualBodies(t *testing.T) {
	for _, tc := range []struct {
		body   string
		refund bool
		want   call
	}{
		{`{"customer":"acme","metric":"api_calls"}`, false, call{Customer: "acme", Metric: "api_calls", Cost: 1}},
		{`{"customer":"acme","metric":"api_calls","cost":40}`, false, call{Customer: "acme", Metric: "api_calls", Cost: 40}},
		{`{"metric":"api_calls","customer":"user@example.com:1","dry_run":true,"request_id":"job-42","cost":2}`, false,
			call{Customer: "user@example.com:1", Metric: "api_calls", Cost: 2, DryRun: true, RequestID: "job-42"}},
		{"{\n  \"customer\": \"acme\",\n  \"metric\": \"api_calls\",\n  \"cost\": 1\n}\n", false, call{Customer: "acme", Metric: "api_calls", Cost: 1}},
		{`{"customer":"acme","metric":"api_calls","cost":2,"request_id":"r-1"}`, true, call{Customer: "acme", Metric: "api_calls", Cost: 2, RequestID: "r-1"}},
		{`{"customer":"acme","metric":"api_calls","subject":"user-7"}`, false, call{Customer: "acme", Metric: "api_calls", Subject: "user-7", Cost: 1}},
		{`{"customer":"acme","metric":"api_calls","cost":2,"subject":"user-7"}`, true, call{Customer: "acme", Metric: "api_calls", Subject: "user-7", Cost: 2}},
		{`{"customer":"acme","items":[{"metric":"api_calls","cost":2},{"metric":"exports","subject":"user-7"}],"request_id":"r-2"}`, false,
			call{Customer: "acme", RequestID: "r-2", Items: []quota.Item{{Metric: "api_calls", Cost: 2}, {Metric: "exports", Cost: 1, Subject: "user-7"}}}},
		{`{"api_key":"qk_x","dry_run":true,"items":[{"subject":"u","metric":"m"}]}`, false,
			call{APIKey: "qk_x", DryRun: true, Items: []quota.Item{{Metric: "m", Cost: 1, Subject: "u"}}}},
	} {
		got, ok := fastDecodeCall([]byte(tc.body), tc.refund)
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("fastDecodeCall(%s) = %+v, %v; want %+v", tc.body, got, ok, tc.want)
		}
	}
}

// The fast path allocates once for a check's strings, subject included,
// and once more for items: no reflection.
func TestFastDecodeCallAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		want float64
	}{
		{"one metric", benchCheckBody, 1},
		{"with a subject", benchSubjectBody, 1},
		{"by key", benchKeyBody, 1},
		{"items", benchItemsBody, 2},
	} {
		if _, ok := fastDecodeCall(tc.body, false); !ok {
			t.Fatalf("%s: %s does not take the fast path", tc.name, tc.body)
		}
		if got := testing.AllocsPerRun(100, func() { fastDecodeCall(tc.body, false) }); got != tc.want {
			t.Errorf("%s: %v allocations, want %v", tc.name, got, tc.want)
		}
	}
}
