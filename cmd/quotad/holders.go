package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/quota/lease"
)

// registerReclaimMetrics registers the counters of what this process took
// back from dead ones, and returns then, wrapped to count each round.
func registerReclaimMetrics(reg *prometheus.Registry, then func(lease.Reclaimed)) func(lease.Reclaimed) {
	leases := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "quotad_lease_reclaimed_total",
		Help: "Leases of processes gone for --reclaim-after that this process took back.",
	})
	units := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "quotad_lease_reclaimed_units_total",
		Help: "Units those leases held unused, no longer counted as used.",
	})
	reg.MustRegister(leases, units)
	return func(r lease.Reclaimed) {
		leases.Add(float64(r.Leases))
		units.Add(float64(r.Units))
		then(r)
	}
}
