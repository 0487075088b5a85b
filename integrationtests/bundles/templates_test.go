package bundles

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/procstat"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// templatedChart is a chart printing two values into a ConfigMap.
var templatedChart = []fleet.BundleResource{
	{Name: "Chart.yaml", Content: "apiVersion: v2\nname: templated\nversion: 1.0.0\n"},
	{Name: "templates/config.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: templated\ndata:\n  cluster: {{ .Values.cluster | quote }}\n  env: {{ .Values.env | quote }}\n"},
}

func templatedBundle(name string, values map[string]any, targets []fleet.BundleTarget) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: name,
				Helm:             &fleet.HelmOptions{ReleaseName: name, Values: &fleet.GenericMap{Data: values}},
			},
			Resources: templatedChart,
			Targets:   targets,
		},
	}
}

// The attacks of issue 35 on the hub's ${ } templating, performed against a running hub:
// a 45-byte template printing a dict that holds itself (a stack overflow no recover
// catches, before the defence) and a 75-byte one joining a gigabyte. Each fails its
// Bundle with InvalidTemplate and a reason; the hub stays up, its memory barely grows,
// and an ordinary templated Bundle still deploys with its cluster's values.
func TestBundleTemplatesCannotCrashOrExhaustTheHub(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	d := register(t, hub, map[string]string{"env": "dev"})[0]
	targets := []fleet.BundleTarget{{ClusterName: d.ClusterName}}
	pid := hub.Process.Pid()
	before, err := procstat.Of(pid)
	if err != nil {
		t.Fatal(err)
	}

	createBundle(t, hub, templatedBundle("self-holding", map[string]any{
		"cluster": `${$d:=dict}${$_:=set $d "a" $d}${$d}`, "env": "x",
	}, targets))
	createBundle(t, hub, templatedBundle("gigabyte-join", map[string]any{
		"cluster": `${ join (repeat 9999 "xxxxxxxxxx") (until 9999) }`, "env": "x",
	}, targets))
	waitProcessed(t, hub, "self-holding", "InvalidTemplate", "for Cluster "+d.ClusterName, "a dict cannot be put into itself")
	waitProcessed(t, hub, "gigabyte-join", "InvalidTemplate", "for Cluster "+d.ClusterName, "the templates produce more than 1048576 bytes")

	// The same attacks in templateValues, where the output is read as YAML.
	tv := templatedBundle("template-values", map[string]any{"env": "x"}, targets)
	tv.Spec.Helm.TemplateValues = map[string]string{"cluster": `${ $s := "xxxxxxxxxxxxxxxx" }${ range until 99 }${ $s = print $s $s }${ end }${ $s }`}
	createBundle(t, hub, tv)
	waitProcessed(t, hub, "template-values", "InvalidTemplate", "range is not allowed in values")

	createBundle(t, hub, templatedBundle("ordinary", map[string]any{
		"cluster": "${ .ClusterName }", "env": "${ .ClusterLabels.env | upper }",
	}, targets))
	waitBundleReady(t, hub, "ordinary", "1/1")
	cm := getConfigMap(t, d, "ordinary", "templated")
	if cm.Data["cluster"] != d.ClusterName || cm.Data["env"] != "DEV" {
		t.Errorf("the ordinary Bundle's ConfigMap holds %v, want cluster=%s env=DEV", cm.Data, d.ClusterName)
	}
	bds, err := hub.Fleet().FleetV1alpha1().BundleDeployments("").List(context.Background(), metav1.ListOptions{LabelSelector: "fleet.cattle.io/bundle-name=ordinary"})
	if err != nil {
		t.Fatal(err)
	}
	if len(bds.Items) != 1 || bds.Items[0].Spec.Options.Helm == nil || bds.Items[0].Spec.Options.Helm.Values == nil ||
		bds.Items[0].Spec.Options.Helm.Values.Data["env"] != "DEV" {
		t.Errorf("the ordinary Bundle's BundleDeployments carry %+v, want one with helm.values.env=DEV", bds.Items)
	}

	// The hub lived through both: the same process answers, and its peak memory grew
	// far less than the gigabyte the join would have built.
	after, err := procstat.Of(pid)
	if err != nil {
		t.Fatalf("the hub process is gone after the template attacks: %v", err)
	}
	hub.WaitReady()
	t.Logf("hub memory: peak RSS %.0f MiB before the attacks, %.0f MiB after (RSS now %.0f MiB)", before.PeakRSSMiB, after.PeakRSSMiB, after.RSSMiB)
	if grown := after.PeakRSSMiB - before.PeakRSSMiB; grown > 512 {
		t.Errorf("the hub's peak RSS grew %.0f MiB during the template attacks", grown)
	}
	for _, name := range []string{"self-holding", "gigabyte-join"} {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(context.Background(), name, framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Summary.DesiredReady != 0 {
			t.Errorf("Bundle %s was deployed to %d clusters: %s", name, b.Status.Summary.DesiredReady, fmt.Sprint(b.Status.Conditions))
		}
	}
}
