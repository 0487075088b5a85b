package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// report is what a run measured; it is printed as a table and written as JSON.
type report struct {
	Clusters     int                `json:"clusters"`
	Date         string             `json:"date"`
	Registration registrationReport `json:"registration"`
	Bundle       bundleReport       `json:"bundle"`
	// Idle is the fleet at rest (--idle), if measured.
	Idle *idleReport `json:"idle,omitempty"`
	// Hub is the hub process's CPU time and memory over the whole run; ControlPlane
	// the API server's and etcd's ("hub controlplane").
	Hub          usage `json:"hub"`
	ControlPlane usage `json:"controlPlane"`
}

type registrationReport struct {
	// CredentialedAllSeconds is from the start until the last agent held its identity.
	CredentialedAllSeconds float64 `json:"credentialedAllSeconds"`
	// ReadyAllSeconds is from the start until the last Cluster was Ready.
	ReadyAllSeconds float64 `json:"readyAllSeconds"`
	// PerCluster and PerClusterReady are percentiles of each cluster's time, from the
	// start, to its credential and to its Cluster's Ready.
	PerCluster      map[string]float64 `json:"perClusterCredentialedSeconds"`
	PerClusterReady map[string]float64 `json:"perClusterReadySeconds"`
	// WritesPerRegistration are the API server's write requests from the start until
	// all are credentialed, per cluster, by "VERB resource"; WritesUntilReady until all
	// are Ready (adding check-ins and the agent bundles' status).
	WritesPerRegistration map[string]float64 `json:"writesPerRegistration"`
	WritesUntilReady      map[string]float64 `json:"writesPerClusterUntilReady"`
	// ReadsPerRegistration are the read requests (GET, LIST, WATCH) until all are
	// credentialed, per cluster: mostly the agents' polls for their credential.
	ReadsPerRegistration   map[string]float64 `json:"readsPerRegistration"`
	ObjectsPerRegistration map[string]float64 `json:"objectsPerRegistration"`
	HubCPUSeconds          float64            `json:"hubCPUSeconds"`
	ControlPlaneCPUSeconds float64            `json:"controlPlaneCPUSeconds"`
}

type bundleReport struct {
	// WrittenAllSeconds is from the Bundle's creation until the last of its
	// BundleDeployments exists; ReadyAllSeconds until the last one is Ready.
	WrittenAllSeconds float64 `json:"writtenAllSeconds"`
	ReadyAllSeconds   float64 `json:"readyAllSeconds"`
	HubCPUSeconds     float64 `json:"hubCPUSeconds"`
}

// idleReport is the fleet at rest: every cluster Ready, the agents only checking in.
type idleReport struct {
	Seconds float64 `json:"seconds"`
	// WritesPerMinute are the API server's write requests per minute by "VERB
	// resource", and "total".
	WritesPerMinute                 map[string]float64 `json:"writesPerMinute"`
	HubCPUSecondsPerMinute          float64            `json:"hubCPUSecondsPerMinute"`
	ControlPlaneCPUSecondsPerMinute float64            `json:"controlPlaneCPUSecondsPerMinute"`
}

func (r *report) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	reg := r.Registration
	fmt.Fprintf(w, "\n%d clusters registering at once\t\n", r.Clusters)
	fmt.Fprintf(w, "  all credentialed\t%.2f s\n", reg.CredentialedAllSeconds)
	fmt.Fprintf(w, "  all Clusters Ready\t%.2f s\n", reg.ReadyAllSeconds)
	fmt.Fprintf(w, "  per cluster, credentialed\t%s\n", pct(reg.PerCluster))
	fmt.Fprintf(w, "  per cluster, Ready\t%s\n", pct(reg.PerClusterReady))
	fmt.Fprintf(w, "  API writes per registration\t%.1f  (%s)\n", reg.WritesPerRegistration["total"], breakdown(reg.WritesPerRegistration))
	fmt.Fprintf(w, "  API writes per cluster until Ready\t%.1f  (%s)\n", reg.WritesUntilReady["total"], breakdown(reg.WritesUntilReady))
	fmt.Fprintf(w, "  API reads per registration\t%.1f  (%s)\n", reg.ReadsPerRegistration["total"], breakdown(reg.ReadsPerRegistration))
	fmt.Fprintf(w, "  objects per registration\t%.1f  (%s)\n", sum(reg.ObjectsPerRegistration), breakdown(reg.ObjectsPerRegistration))
	fmt.Fprintf(w, "  hub CPU / control plane CPU\t%.1f s / %.1f s\n", reg.HubCPUSeconds, reg.ControlPlaneCPUSeconds)
	fmt.Fprintf(w, "a Bundle to all %d clusters\t\n", r.Clusters)
	fmt.Fprintf(w, "  all BundleDeployments written\t%.2f s\n", r.Bundle.WrittenAllSeconds)
	fmt.Fprintf(w, "  all BundleDeployments Ready\t%.2f s\n", r.Bundle.ReadyAllSeconds)
	fmt.Fprintf(w, "  hub CPU\t%.1f s\n", r.Bundle.HubCPUSeconds)
	if idle := r.Idle; idle != nil {
		fmt.Fprintf(w, "the %d clusters at rest for %.0f s\t\n", r.Clusters, idle.Seconds)
		fmt.Fprintf(w, "  API writes per minute\t%.0f  (%s)\n", idle.WritesPerMinute["total"], breakdown(idle.WritesPerMinute))
		fmt.Fprintf(w, "  hub CPU / control plane CPU per minute\t%.1f s / %.1f s\n", idle.HubCPUSecondsPerMinute, idle.ControlPlaneCPUSecondsPerMinute)
	}
	fmt.Fprintf(w, "hub process (--kubeconfig), whole run\t\n")
	fmt.Fprintf(w, "  CPU\t%.1f s\n", r.Hub.CPUSeconds)
	fmt.Fprintf(w, "  peak resident memory\t%.0f MiB (now %.0f MiB)\n", r.Hub.PeakRSSMiB, r.Hub.RSSMiB)
	fmt.Fprintf(w, "control plane (API server and etcd), whole run\t\n")
	fmt.Fprintf(w, "  CPU\t%.1f s\n", r.ControlPlane.CPUSeconds)
	fmt.Fprintf(w, "  peak resident memory\t%.0f MiB\n", r.ControlPlane.PeakRSSMiB)
	w.Flush()
}

func (r *report) write(path string) error { return writeJSON(path, r) }

func pct(p map[string]float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("p50 %.2f s, p95 %.2f s, p99 %.2f s", p["p50"], p["p95"], p["p99"])
}

// breakdown lists the parts of counts, largest first, leaving out "total".
func breakdown(counts map[string]float64) string {
	type part struct {
		name string
		n    float64
	}
	var parts []part
	for k, v := range counts {
		if k != "total" && v >= 0.05 {
			parts = append(parts, part{k, v})
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].n != parts[j].n {
			return parts[i].n > parts[j].n
		}
		return parts[i].name < parts[j].name
	})
	var s []string
	for _, p := range parts {
		s = append(s, fmt.Sprintf("%s %.1f", p.name, p.n))
	}
	return strings.Join(s, ", ")
}

func sum(counts map[string]float64) float64 {
	var t float64
	for _, v := range counts {
		t += v
	}
	return t
}
