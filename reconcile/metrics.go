package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
)

// PrometheusMetrics exports a sync's passes and contests.
type PrometheusMetrics struct {
	passes    *prometheus.CounterVec
	duration  prometheus.Histogram
	objects   *prometheus.GaugeVec
	writes    prometheus.Counter
	contested prometheus.Gauge
	contests  *prometheus.CounterVec
	reverted  *prometheus.CounterVec
}

// NewMetrics registers the sync metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "truce_sync_passes_total",
			Help: "Sync passes by result: synced, contested, failed (per-object errors) or error (the pass could not run)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "truce_sync_pass_duration_seconds",
			Help: "Time of one sync pass.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "truce_sync_objects",
			Help: "Objects by what the last pass did with them."}, []string{"action"}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "truce_sync_writes_total",
			Help: "Apply and delete requests made (dry runs not counted)."}),
		contested: prometheus.NewGauge(prometheus.GaugeOpts{Name: "truce_sync_contested_fields",
			Help: "Fields truce does not write because another writer keeps changing them."}),
		contests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "truce_sync_contests_total",
			Help: "Fields found contested, by kind of the other writer (admission or a field manager operation)."}, []string{"writer"}),
		reverted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "truce_sync_manual_edits_reverted_total",
			Help: "Fields people edited outside Git (kubectl and the --human-field-manager managers) that truce wrote back, by field manager."}, []string{"manager"}),
	}
	for _, c := range []prometheus.Collector{m.passes, m.duration, m.objects, m.writes, m.contested, m.contests, m.reverted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Pass implements Metrics.
func (m *PrometheusMetrics) Pass(res *Result, err error) {
	switch {
	case err != nil || res == nil:
		m.passes.WithLabelValues("error").Inc()
		return
	case len(res.Errors) > 0:
		m.passes.WithLabelValues("failed").Inc()
	case len(res.Contested) > 0:
		m.passes.WithLabelValues("contested").Inc()
	default:
		m.passes.WithLabelValues("synced").Inc()
	}
	m.duration.Observe(res.Duration.Seconds())
	for _, a := range []Action{Created, Configured, Unchanged, Pruned, Skipped, Failed} {
		m.objects.WithLabelValues(string(a)).Set(float64(res.Count(a)))
	}
	if !res.DryRun {
		m.writes.Add(float64(res.Writes))
	}
	m.contested.Set(float64(len(res.Contested)))
}

// Contested implements Metrics.
func (m *PrometheusMetrics) Contested(c Contest) {
	w := "admission"
	if c.Writer.Manager != "" {
		w = c.Writer.Operation
	}
	m.contests.WithLabelValues(w).Inc()
}

// Reverted implements Metrics.
func (m *PrometheusMetrics) Reverted(e ManualEdit) {
	m.reverted.WithLabelValues(e.Writer.Manager).Inc()
}
