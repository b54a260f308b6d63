package simulate

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseCSV(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *Trace
	}{
		{"with header", "unix_ms,customer,cost\n1000,acme,1\n1001,beta,3\n1001,acme,2\n",
			&Trace{Customers: []string{"acme", "beta"},
				Checks: []Check{{1000, 0, 1}, {1001, 1, 3}, {1001, 0, 2}}}},
		{"without header, spaces, blank lines, CRLF", "5, acme , 1\r\n\r\n6,\"a,b\",2\n",
			&Trace{Customers: []string{"acme", "a,b"},
				Checks: []Check{{5, 0, 1}, {6, 1, 2}}}},
		{"out of order: sorted, stable within a millisecond", "30,a,1\n10,b,1\n30,c,2\n10,a,3\n",
			&Trace{Customers: []string{"a", "b", "c"},
				Checks: []Check{{10, 1, 1}, {10, 0, 3}, {30, 0, 1}, {30, 2, 2}}}},
		{"a byte-order mark and a line of spaces, as spreadsheets write", "\ufeffunix_ms,customer,cost\n1,a,1\n   \n2,a,1\n",
			&Trace{Customers: []string{"a"}, Checks: []Check{{1, 0, 1}, {2, 0, 1}}}},
		{"a byte-order mark before a check", "\ufeff1,a,1\n", &Trace{Customers: []string{"a"}, Checks: []Check{{1, 0, 1}}}},
		{"empty", "", &Trace{}},
		{"header only", "Unix_ms, Customer, Cost\n", &Trace{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCSV(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseCSVBadLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1,a,1\n2,b\n", "line 2: want 3 fields"},
		{"unix_ms,customer,cost\n1,a,1\n\nx,a,1\n", `line 4: unix_ms "x" is not an integer from 0 to 253402300799999`},
		{"0,a,1\n9223372036854775807,a,1\n", `line 2: unix_ms "9223372036854775807" is not an integer from 0`},
		{"-5,a,1\n", `line 1: unix_ms "-5"`},
		{"1,a,1\n2,,1\n", "line 2: customer is empty"},
		{"1,a,0\n", `line 1: cost "0" is not an integer from 1`},
		{"1,a,1\n2,a,1.5\n", `line 2: cost "1.5"`},
		{"1,a,1\n2,a,1,9\n", "line 2: want 3 fields"},
		{"1,a,1\n2,\"a,1\n", "line 2:"},
		{"time,who,n\n1,a,1\n", `line 1: unix_ms "time"`},
	} {
		_, err := ParseCSV(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCSV(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestTraceCSVRoundTrip(t *testing.T) {
	tr := &Trace{Customers: []string{"acme", `say "hi", twice`},
		Checks: []Check{{1, 0, 1}, {1, 1, 7}, {2000, 0, 1 << 40}}}
	var buf bytes.Buffer
	if err := tr.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ParseCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Errorf("round trip: got %+v, want %+v", got, tr)
	}
	if tr.Busiest() != 0 {
		t.Errorf("Busiest = %d, want 0", tr.Busiest())
	}
}
