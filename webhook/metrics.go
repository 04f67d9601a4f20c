package webhook

import (
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metrics are the server's own Prometheus metrics. Per-policy checks and
// evaluation errors come from the upstream policy plugins themselves
// (apiserver_validating_admission_policy_check_total and
// apiserver_mutating_admission_policy_check_total with their error_type
// and enforcement_action labels), gathered next to these.
type metrics struct {
	registry   *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	rejections *prometheus.CounterVec
	errors     *prometheus.CounterVec
	policies   *prometheus.GaugeVec
	reloads    *prometheus.CounterVec
	lastReload prometheus.Gauge
	inflight   prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "truce_webhook_requests_total",
			Help: "AdmissionReview requests answered, by webhook path, operation, decision (allowed, patched, denied, error: an HTTP error) and dry run (unknown for requests that did not parse).",
		}, []string{"webhook", "operation", "decision", "dry_run"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "truce_webhook_request_duration_seconds",
			Help: "Time from reading a request to writing its answer, by webhook path, operation and decision.",
			// Policies answer in tens of microseconds; the API server
			// gives up at timeoutSeconds (2 s by default).
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2},
		}, []string{"webhook", "operation", "decision"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "truce_webhook_rejections_total",
			Help: "Requests denied, by the policy that denied them (dry runs are not counted).",
		}, []string{"webhook", "policy"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "truce_webhook_errors_total",
			Help: "Requests answered with an HTTP error (the API server applies the webhook's failurePolicy), by reason.",
		}, []string{"webhook", "reason"}),
		policies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "truce_webhook_policies",
			Help: "Policies in force, by kind.",
		}, []string{"kind"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "truce_webhook_policy_reloads_total",
			Help: "Policy reloads, by result (ok, error). After an error the previous policies stay in force.",
		}, []string{"result"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "truce_webhook_policy_reload_failed",
			Help: "1 when the last attempt to load the policy files failed and an older set is in force.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "truce_webhook_inflight_requests",
			Help: "Reviews being read or evaluated.",
		}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.rejections, m.errors, m.policies, m.reloads, m.lastReload, m.inflight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// gatherer is what /metrics serves.
func (m *metrics) gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{m.registry, legacyregistry.DefaultGatherer}
}

// deniedBy finds the policy named in the policy plugins' rejection
// messages ("ValidatingAdmissionPolicy 'NAME' with binding 'B' denied
// request: ...", "policy 'NAME' with binding 'B' denied request: ...").
var deniedBy = regexp.MustCompile(`(?:AdmissionPolicy|policy) '([^']+)' with binding '[^']*' denied request`)

func policyOf(message string) string {
	if m := deniedBy.FindStringSubmatch(message); m != nil {
		return m[1]
	}
	return "unknown"
}

func promHandler(m *metrics) http.Handler {
	return promhttp.HandlerFor(m.gatherer(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
