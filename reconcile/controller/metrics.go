package controller

import "github.com/prometheus/client_golang/prometheus"

// Metrics export the schedule of a Loop, next to reconcile.NewMetrics'
// pass counts: staleness alerts compare truce_sync_last_pass_timestamp_seconds
// with the interval.
type Metrics struct {
	leader, lastPass, nextPass, attempt prometheus.Gauge
}

// NewMetrics registers the loop metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "truce_sync_leader",
			Help: "1 while this replica runs passes (it holds the lease, or leader election is off)."}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "truce_sync_last_pass_timestamp_seconds",
			Help: "When the last pass ended, in seconds since the epoch."}),
		nextPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "truce_sync_next_pass_timestamp_seconds",
			Help: "When the next pass is due, in seconds since the epoch."}),
		attempt: prometheus.NewGauge(prometheus.GaugeOpts{Name: "truce_sync_backoff_attempt",
			Help: "Passes in a row that wrote or failed (the self-heal backoff step); 0 when the last pass found nothing to correct."}),
	}
	for _, c := range []prometheus.Collector{m.leader, m.lastPass, m.nextPass, m.attempt} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
