package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// holdersAnswer is GET /v1/admin/holders.
type holdersAnswer struct {
	Holders []struct {
		Holder  uint32 `json:"holder"`
		Running bool   `json:"running"`
		Self    bool   `json:"self"`
		Leases  int64  `json:"leases"`
		Unused  int64  `json:"unused"`
	} `json:"holders"`
}

// A SIGKILLed process leaves the units its lease held unused counted as
// used; an admin's release gives them back at once, and so do the other
// processes by themselves once it has been gone for --reclaim-after. Then
// the day's usage is what was admitted.
func TestKilledHolderLeasesReleasedAndReclaimed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// reclaimAfter is the survivor's --reclaim-after.
		reclaimAfter string
		release      bool
	}{
		{"released by an admin", "1h", true},
		{"reclaimed after the bound", "1s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := dbtest.New(t)
			survivor := MustStartProcess(t, schema, "QUOTAD_RECLAIM_AFTER="+tc.reclaimAfter)
			s := survivor.server(t)
			// A day limit of 1000 leases blocks of 10.
			MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
			victim := MustStartProcess(t, schema)
			v := victim.server(t)
			const admitted = 3
			for range admitted {
				if _, ans := v.check(`{"customer":"acme","metric":"api_calls"}`); !ans.Allowed {
					t.Fatal("denied")
				}
			}
			// Once its checks pause, the victim reports its block's 8
			// unused units (the first check reserved 1 and a block of 10).
			var victimKey uint32
			eventually(t, func() bool {
				for _, h := range holdersOf(t, s).Holders {
					if !h.Self && h.Leases == 1 && h.Unused == 8 {
						victimKey = h.Holder
						return true
					}
				}
				return false
			}, "the victim's report of its unused units")
			if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-victim.done
			killed := time.Now()
			if got := rawDay(t, schema, "acme"); got != admitted+8 {
				t.Fatalf("counter = %d after the kill, want %d admitted + 8 held by the dead process", got, admitted)
			}

			if tc.release {
				r := s.mustDo(http.StatusOK, "POST", fmt.Sprintf("/v1/admin/holders/%d/release", victimKey), "")
				var got struct{ Holder, Leases, Units int64 }
				if err := json.Unmarshal(r.Body, &got); err != nil || got.Holder != int64(victimKey) || got.Leases != 1 || got.Units != 8 {
					t.Fatalf("release: %s, %v; want 1 lease and 8 units back", r.Body, err)
				}
				// Done once: a second release finds no such holder.
				s.mustDo(http.StatusNotFound, "POST", fmt.Sprintf("/v1/admin/holders/%d/release", victimKey), "")
			} else {
				eventually(t, func() bool { return rawDay(t, schema, "acme") == admitted }, "the dead process's units taken back")
				t.Logf("taken back %s after the kill (--reclaim-after 1s)", time.Since(killed).Round(time.Millisecond))
				// The reclaim counts them, and forgets the holder, once the
				// counters' transaction is committed.
				eventually(t, func() bool {
					return s.metricValue("quotad_lease_reclaimed_units_total") == 8 && !listed(t, s, victimKey)
				}, "the reclaim counted in quotad_lease_reclaimed_units_total and the holder forgotten")
			}
			if got := rawDay(t, schema, "acme"); got != admitted {
				t.Fatalf("counter = %d, want the %d admitted", got, admitted)
			}
			if listed(t, s, victimKey) {
				t.Errorf("the dead holder %d is still listed", victimKey)
			}
		})
	}
}

// Releasing the process that answers, or a key that is not one, is
// refused with a problem that says why.
func TestReleaseHolderRefused(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	var self uint32
	eventually(t, func() bool {
		for _, h := range holdersOf(t, s).Holders {
			if h.Self && h.Running {
				self = h.Holder
				return true
			}
		}
		return false
	}, "this process among the holders")
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{fmt.Sprintf("/v1/admin/holders/%d/release", self), http.StatusConflict, "conflict"},
		{fmt.Sprintf("/v1/admin/holders/%d/release", self+1), http.StatusNotFound, "not_found"},
		{"/v1/admin/holders/-1/release", http.StatusBadRequest, "validation_failed"},
		{"/v1/admin/holders/4294967296/release", http.StatusBadRequest, "validation_failed"},
		{"/v1/admin/holders/007/release", http.StatusBadRequest, "validation_failed"},
	} {
		r := s.mustDo(tc.status, "POST", tc.path, "")
		if code := r.JSON(t)["code"]; code != tc.code {
			t.Errorf("POST %s: code %v, want %s (%s)", tc.path, code, tc.code, r.Body)
		}
	}
	s.mustDo(http.StatusForbidden, "GET", "/v1/admin/holders", "", "Authorization", "Bearer "+checkToken)
}

// holdersOf lists s's holders.
func holdersOf(t *testing.T, s *testServer) holdersAnswer {
	t.Helper()
	var a holdersAnswer
	if err := json.Unmarshal(s.mustDo(http.StatusOK, "GET", "/v1/admin/holders", "").Body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// listed reports whether s lists holder among the holders.
func listed(t *testing.T, s *testServer, holder uint32) bool {
	t.Helper()
	for _, h := range holdersOf(t, s).Holders {
		if h.Holder == holder {
			return true
		}
	}
	return false
}
