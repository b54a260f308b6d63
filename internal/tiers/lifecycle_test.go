package tiers

import (
	"context"
	"testing"
	"time"
)

// The plan in effect at an instant: a trial's until it ends, then the
// customer's, then a scheduled change's from its instant; and the order
// quotad applies them in.
func TestPlanAtAndDue(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	both := Customer{ID: "acme", Plan: "free", Trial: &Trial{Plan: "pro", EndsAt: at(1)},
		ScheduledChange: &ScheduledChange{Plan: "team", At: at(2)}}
	changeFirst := Customer{ID: "acme", Plan: "free", Trial: &Trial{Plan: "pro", EndsAt: at(2)},
		ScheduledChange: &ScheduledChange{Plan: "team", At: at(1)}}
	tests := []struct {
		name      string
		c         Customer
		now       time.Time
		wantPlan  string
		wantDue   bool
		wantAt    time.Time
		wantTrial bool   // the due change is the trial's end
		wantAfter string // the customer's plan after the due change
	}{
		{"nothing pending", Customer{Plan: "free"}, at(5), "free", false, time.Time{}, false, ""},
		{"in the trial", both, at(0), "pro", false, time.Time{}, false, ""},
		{"a second before its end", both, at(1).Add(-time.Second), "pro", false, time.Time{}, false, ""},
		{"at the trial's end", both, at(1), "free", true, at(1), true, "free"},
		{"at the scheduled change", both, at(2), "team", true, at(1), true, "free"},
		{"change before the trial ends: still on trial", changeFirst, at(1), "pro", true, at(1), false, "team"},
		{"change before the trial ends, after both", changeFirst, at(2), "team", true, at(1), false, "team"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.PlanAt(tt.now); got != tt.wantPlan {
				t.Errorf("PlanAt = %s, want %s", got, tt.wantPlan)
			}
			next, dueAt, trial, ok := tt.c.Due(tt.now)
			if ok != tt.wantDue || !dueAt.Equal(tt.wantAt) || trial != tt.wantTrial || ok && next.Plan != tt.wantAfter {
				t.Errorf("Due = %s at %s, trial %v, %v; want %s at %s, trial %v, %v",
					next.Plan, dueAt, trial, ok, tt.wantAfter, tt.wantAt, tt.wantTrial, tt.wantDue)
			}
			// Applying what is due changes nothing at now: the plan in
			// effect is the same before and after.
			for c := tt.c; ; {
				next, _, _, ok := c.Due(tt.now)
				if !ok {
					if got := c.PlanAt(tt.now); got != tt.wantPlan {
						t.Errorf("after applying all that is due, PlanAt = %s, want %s", got, tt.wantPlan)
					}
					break
				}
				c = next
			}
		})
	}
}

// A cached account with a trial resolves its plan at the time asked
// (Account.At), and a change of the trial's plan reaches it.
func TestCacheAccountWithPendingPlans(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setPlan(Plan{Key: "free", Limits: []Limit{hard("api_calls", Day, 100)}})
	src.setPlan(Plan{Key: "pro", Limits: []Limit{hard("api_calls", Day, 1000)}})
	src.setCustomer(Customer{ID: "acme", Plan: "free", Trial: &Trial{Plan: "pro", EndsAt: t0.Add(time.Hour)}})
	c := NewCache(src, 0)
	limitAt := func(now time.Time) int64 {
		t.Helper()
		a, err := c.Account(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return a.At(now).Plan.Limits[0].Limit
	}
	if got := limitAt(t0); got != 1000 {
		t.Errorf("in the trial: %d, want pro's 1000", got)
	}
	if got := limitAt(t0.Add(time.Hour)); got != 100 {
		t.Errorf("at its end: %d, want free's 100", got)
	}
	src.setPlan(Plan{Key: "pro", Limits: []Limit{hard("api_calls", Day, 2000)}})
	c.Invalidate(Change{Kind: PlanChanged, Key: "pro"})
	if got := limitAt(t0); got != 2000 {
		t.Errorf("after the trial plan's change: %d, want 2000", got)
	}
	if n := src.calls["c:acme"]; n != 2 {
		t.Errorf("loads of acme = %d, want 2 (once more after its trial plan changed)", n)
	}
}
