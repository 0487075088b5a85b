// Package metrics is what the hub and the agent expose on /metrics for Prometheus:
// the decisions users ask about (registrations granted and refused, tokens expired,
// imports failed, bundles deployed), BundleDeployments by state, lasso's reconcile
// durations, and the Go runtime and process metrics.
package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	lassometrics "github.com/rancher/lasso/pkg/metrics"
	"github.com/sirupsen/logrus"

	"github.com/flotilla/flotilla/pkg/health"
)

// Registry holds Flotilla's metrics (not the global registry, which Kubernetes
// packages linked into the hub fill with their own).
var Registry = prometheus.NewRegistry()

var (
	// Registrations counts registration requests answered, by result (granted,
	// refused) and refusal reason.
	Registrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_registrations_total", Help: "Registration requests answered, by result and refusal reason.",
	}, []string{"result", "reason"})
	// TokensExpired counts ClusterRegistrationTokens deleted at the end of their TTL.
	TokensExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flotilla_registration_tokens_expired_total", Help: "ClusterRegistrationTokens deleted because their TTL ended.",
	})
	// ImportsFailed counts failed attempts to deploy an imported cluster's agent, by reason.
	ImportsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_imports_failed_total", Help: "Failed attempts to deploy the agent into an imported cluster, by reason.",
	}, []string{"reason"})
	// AgentsDeployed counts agents the hub deployed into imported clusters.
	AgentsDeployed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flotilla_imports_deployed_total", Help: "Agents deployed by the hub into imported clusters.",
	})
	// Deployments counts the agent's Helm operations for BundleDeployments, by result.
	Deployments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_agent_deployments_total", Help: "Helm installs and upgrades of BundleDeployments by the agent, by result.",
	}, []string{"result"})
	// CheckIns counts the agent's check-ins with the hub, by result.
	CheckIns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_agent_checkins_total", Help: "Check-ins of the agent with the hub, by result.",
	}, []string{"result"})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		Registrations, TokensExpired, ImportsFailed, AgentsDeployed, Deployments, CheckIns,
	)
	// lasso_controller_reconcile_time_seconds and lasso_controller_total_handler_execution, per controller.
	lassometrics.MustRegister(Registry)
}

// StateCounter reports, at each scrape, how many BundleDeployments are in each state.
type StateCounter func() map[string]int

var bundleDeploymentsDesc = prometheus.NewDesc("flotilla_bundledeployments", "BundleDeployments by state.", []string{"state"}, nil)

// Describe implements prometheus.Collector.
func (f StateCounter) Describe(ch chan<- *prometheus.Desc) { ch <- bundleDeploymentsDesc }

// Collect implements prometheus.Collector.
func (f StateCounter) Collect(ch chan<- prometheus.Metric) {
	for state, n := range f() {
		ch <- prometheus.MustNewConstMetric(bundleDeploymentsDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// Serve serves /metrics (and, with profiling, Go profiles at /debug/pprof) on addr
// until ctx ends; "" or "0" turns it off.
func Serve(ctx context.Context, addr string, profiling bool) error {
	if addr == "" || addr == "0" {
		return nil
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(Registry, promhttp.HandlerOpts{}))
	if profiling && !loopback(listener.Addr()) {
		// Profiles are served without authentication: only where just this machine
		// reaches them.
		logrus.WithField("address", listener.Addr().String()).Warn("Not serving the hub's Go profiles: --metrics-bind-address is not a loopback address, and profiles are served without authentication")
		profiling = false
	}
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	health.ServeListener(ctx, listener, "/metrics", mux)
	return nil
}

// loopback says whether addr listens on a loopback address only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
