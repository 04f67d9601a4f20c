package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"

	"github.com/kyverno/kyverno/pkg/breaker"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/toggle"
	reportutils "github.com/kyverno/kyverno/pkg/utils/report"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// kyvernoConfigMap is the ConfigMap "kyverno" of Kyverno v1.19.1's Helm
// chart rendered with its default values (resource filters, webhook
// namespace selector, exclusions). Regenerate with go generate in
// engine/kyverno.
//
//go:embed kyverno-config.yaml
var kyvernoConfigMap []byte

// defaultConfiguration is Kyverno's configuration in a default install.
func defaultConfiguration() (config.Configuration, error) {
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(kyvernoConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("decoding Kyverno's default ConfigMap: %w", err)
	}
	c := config.NewDefaultConfiguration(false)
	c.Load(&cm)
	return c, nil
}

// reportingConfig is the reporting configuration of Kyverno's main.
var reportingConfig reportutils.ReportingConfiguration

// setupGlobals sets what Kyverno's main sets up before its handlers run:
// the reporting configuration its handlers consult and the reports
// breaker, open as with admission reports disabled (truce writes no
// reports).
func setupGlobals() {
	offlineNetwork()
	// Kyverno's controllers run against client-go's fake clientsets, whose
	// watchers hold DefaultChanSize events and panic ("channel full") when
	// a burst outruns the informer reading them: Kyverno's admission
	// policy generator writing the status of a few hundred policies (the
	// kyverno/policies library at once) did so on a busy machine. A real
	// API server's watch has no such limit; room for a burst as large as
	// any repository's policies keeps the fake from crashing.
	watch.DefaultChanSize = fakeWatchBuffer
	reportingConfig = reportutils.NewReportingConfig([]string{"pass", "fail", "warn", "error", "skip"}, "validate", "mutate", "mutateExisting", "generate", "imageVerify")
	breaker.SetReportsBreaker(breaker.NewBreaker("admission reports", func(context.Context) bool { return true }))
	// Offline, a CEL policy's http.get/http.post is refused before any
	// name lookup or connection, by Kyverno's own allowlist (its
	// --httpAllowlist) naming a host that cannot exist: the rule errors,
	// naming the URL, instead of truce reaching out or guessing.
	_ = toggle.HTTPAllowlist.Parse(offlineHTTPAllowlist)
	// The ImageValidatingPolicy engine and the CEL image-data library
	// fetch through Kyverno's shared registry transport, not the registry
	// client the legacy engine is given: it refuses every connection.
	offlineRegistryTransport()
}

// fakeWatchBuffer is how many events a fake watcher holds (32 bytes each,
// allocated when the watch starts).
const fakeWatchBuffer = 1 << 13

// offlineHTTPAllowlist is the only URL prefix CEL's http library may reach:
// a reserved name (RFC 2606) nothing answers.
const offlineHTTPAllowlist = "https://truce-runs-offline.invalid/"

// quietLogs sends Kyverno's klog output to standard error only when
// TRUCE_KYVERNO_LOG is set: truce reads this process's standard output.
func quietLogs() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "true")
	if os.Getenv("TRUCE_KYVERNO_LOG") == "" {
		_ = fs.Set("v", "0")
		klog.SetOutput(discard{})
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
