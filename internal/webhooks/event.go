// Package webhooks tells people about usage: it detects when a customer's
// long window crosses a threshold, starts its overage or is first denied,
// and delivers those events to the receivers admins registered, signed as
// Standard Webhooks. Detection runs beside the check path, never in it;
// delivery runs from an outbox in PostgreSQL (internal/store implements
// the interfaces declared here).
package webhooks

import (
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// EventType names what happened to a window's usage.
type EventType string

// The event types.
const (
	// Threshold: a long window's used reached Threshold percent of its
	// limit.
	Threshold EventType = "usage.threshold"
	// OverageStarted: a soft window's used went beyond its limit.
	OverageStarted EventType = "usage.overage_started"
	// LimitReached: the window denied a check for the first time.
	LimitReached EventType = "usage.limit_reached"
	// GrantExhausted: checks drew the last unit of a customer's grant
	// (Grant; Limit is its amount). It concerns no window.
	GrantExhausted EventType = "grant.exhausted"
	// TrialEnded: a customer's trial of Plan ended and it is on NextPlan
	// since (At is the trial's end). It concerns no metric nor window.
	TrialEnded EventType = "trial.ended"
)

// EventTypes lists every event type.
var EventTypes = []EventType{Threshold, OverageStarted, LimitReached, GrantExhausted, TrialEnded}

// Valid reports whether t is a known event type.
func (t EventType) Valid() bool {
	return t == Threshold || t == OverageStarted || t == LimitReached || t == GrantExhausted || t == TrialEnded
}

// Event is one thing that happened to one long window of one customer's
// metric. It happens once per customer, metric, window, window start, type
// and threshold, whichever process sees it first.
type Event struct {
	Type       EventType
	Customer   string
	Metric     string
	Window     tiers.Window // hour, day, week, month or total
	Start, End time.Time    // the window's bounds
	Threshold  int          // percent of Limit, for Threshold; 0 otherwise
	Limit      int64
	Used       int64 // the window's used when the event was seen
	At         time.Time
	// Grant is the grant a GrantExhausted event is about ("" otherwise);
	// such an event has no Window, Start or End.
	Grant string
	// Plan and NextPlan are the plans of a TrialEnded event: the trial's
	// and the customer's after it ("" otherwise).
	Plan, NextPlan string
}

// Watch is what the registered webhooks listen to: the event types at
// least one subscribes to, and every threshold percent any of them names.
// Detection looks for nothing else.
type Watch struct {
	Types      map[EventType]bool
	Thresholds []int // ascending, without duplicates
}

// Empty reports whether no webhook listens to anything.
func (w Watch) Empty() bool { return len(w.Types) == 0 }
