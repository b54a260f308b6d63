package quotad

import (
	"context"
	"net/http"
)

// WhatIfSpec is the body of WhatIf.
type WhatIfSpec struct {
	Plan string `json:"plan"`
	// Limits are the proposed limits, as a plan's.
	Limits []Limit `json:"limits"`
	// Price is the proposed price, answered back.
	Price *Price `json:"price,omitempty"`
	// From and To are the first and last days replayed (YYYY-MM-DD).
	From string `json:"from"`
	To   string `json:"to"`
	// Customers, when set, are replayed instead of the plan's.
	Customers []string `json:"customers,omitempty"`
}

// WhatIfFigures are what a replay found, for a customer or in total.
type WhatIfFigures struct {
	PeriodsOver          int64 `json:"periods_over"`
	DeniedUnits          int64 `json:"denied_units"`
	OverageUnits         int64 `json:"overage_units"`
	OverageRevenueMicros int64 `json:"overage_revenue_micros"`
}

// WhatIfRecorded is what history recorded over the same days and metrics.
type WhatIfRecorded struct {
	DeniedUnits  int64 `json:"denied_units"`
	OverageUnits int64 `json:"overage_units"`
}

// WhatIfCustomer is one customer's replay.
type WhatIfCustomer struct {
	Customer string `json:"customer"`
	WhatIfFigures
	Recorded WhatIfRecorded `json:"recorded"`
}

// WhatIfNotReplayed is a proposed limit daily history cannot replay.
type WhatIfNotReplayed struct {
	Metric string `json:"metric"`
	Window string `json:"window"`
	Per    string `json:"per,omitempty"`
	Reason string `json:"reason"`
}

// WhatIf is WhatIf's answer.
type WhatIf struct {
	Plan  string `json:"plan"`
	From  string `json:"from"`
	To    string `json:"to"`
	Price Price  `json:"price"`
	// Customers are those whose replay or record is not all zero.
	Customers         []WhatIfCustomer    `json:"customers"`
	Total             WhatIfFigures       `json:"total"`
	Recorded          WhatIfRecorded      `json:"recorded"`
	CustomersReplayed int64               `json:"customers_replayed"`
	NotReplayed       []WhatIfNotReplayed `json:"not_replayed"`
}

// WhatIf replays the recorded daily usage of the plan's customers (or
// spec.Customers) against proposed limits; nothing is written. Errors
// match ErrValidation, ErrPlanNotFound, ErrCustomerNotFound.
func (s *PlansService) WhatIf(ctx context.Context, spec WhatIfSpec) (*WhatIf, error) {
	var out WhatIf
	if _, err := s.client.do(ctx, call{method: http.MethodPost, path: "/v1/what-if", body: spec, retry: true, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
