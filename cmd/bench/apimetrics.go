package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// writeVerbs are the verbs of apiserver_request_total that change something; the
// others (GET, LIST, WATCH, ...) read.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// requestCounts are the API server's requests by "VERB resource" (with the HTTP code
// when it is not a success), and their sum as "total".
type requestCounts struct {
	writes, reads map[string]float64
}

// apiRequests reads the API server's own request counter. Every client's requests
// count: the hub's, the agents', the control plane's controllers' and the
// benchmark's own.
func apiRequests(ctx context.Context, kube kubernetes.Interface) (requestCounts, error) {
	counts := requestCounts{writes: map[string]float64{}, reads: map[string]float64{}}
	families, err := apiMetrics(ctx, kube)
	if err != nil {
		return counts, err
	}
	family, ok := families["apiserver_request_total"]
	if !ok {
		return counts, errNoMetrics
	}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out := counts.reads
		if writeVerbs[labels["verb"]] {
			out = counts.writes
		}
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		key := labels["verb"] + " " + resource
		if code := labels["code"]; code != "" && code[0] != '2' {
			key += " (" + code + ")"
		}
		v := m.GetCounter().GetValue()
		out[key] += v
		out["total"] += v
	}
	return counts, nil
}

// countedKinds are the kinds a registration and a Bundle create.
var countedKinds = map[string]schema.GroupVersionResource{
	"Namespace":                  {Version: "v1", Resource: "namespaces"},
	"Secret":                     {Version: "v1", Resource: "secrets"},
	"ServiceAccount":             {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":                  {Version: "v1", Resource: "configmaps"},
	"Event":                      {Version: "v1", Resource: "events"},
	"Role":                       {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":                {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":         {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Cluster":                    fleet.SchemeGroupVersion.WithResource("clusters"),
	"ClusterRegistrationRequest": fleet.SchemeGroupVersion.WithResource("clusterregistrationrequests"),
	"ClusterRegistrationToken":   fleet.SchemeGroupVersion.WithResource("clusterregistrationtokens"),
	"Bundle":                     fleet.SchemeGroupVersion.WithResource("bundles"),
	"BundleDeployment":           fleet.SchemeGroupVersion.WithResource("bundledeployments"),
	"Content":                    fleet.SchemeGroupVersion.WithResource("contents"),
}

// countObjects counts the objects of countedKinds.
func countObjects(ctx context.Context, meta metadata.Interface) (map[string]float64, error) {
	out := map[string]float64{}
	for kind, gvr := range countedKinds {
		list, err := meta.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("counting %s: %w", kind, err)
		}
		out[kind] = float64(len(list.Items))
	}
	return out, nil
}
