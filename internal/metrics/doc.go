// Package metrics exposes credwatch's Prometheus metrics. Per-watch series are written at scrape
// time from the informer cache, as cert-manager produces them, so a deleted watch or a vanished
// credential leaves no stale series behind; Graph requests are counted as they happen.
package metrics
