package target

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestTemplate(t *testing.T) {
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "fleet-default", Labels: map[string]string{"env": "prod", "region": "eu"}, Annotations: map[string]string{"owner": "ops"}},
		Spec:       fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"replicas": 3, "dns": map[string]interface{}{"zone": "eu.example.com"}}}},
	}
	cases := []struct {
		name     string
		values   string
		template map[string]string
		disable  bool
		want     string
		err      string
	}{
		{name: "labels, name and namespace", values: "env: ${ .ClusterLabels.env }\nname: ${ .ClusterName }\nns: ${ .ClusterNamespace }\n", want: "env: prod\nname: c1\nns: fleet-default\n"},
		{name: "cluster values keep their type", values: "replicas: ${ .ClusterValues.replicas }\nzone: ${ .ClusterValues.dns.zone }\n", want: "replicas: 3\nzone: eu.example.com\n"},
		{name: "sprig functions", values: "upper: ${ .ClusterLabels.region | upper }\ndefault: ${ get .ClusterLabels \"tier\" | default \"web\" }\n", want: "default: web\nupper: EU\n"},
		{name: "annotations", values: "owner: ${ .ClusterAnnotations.owner }\n", want: "owner: ops\n"},
		{name: "the cluster label prefix", values: "a:\n  b: global.fleet.clusterLabels.env\n  c: global.fleet.clusterLabels.missing\n", want: "a:\n  b: prod\n  c: \"\"\n"},
		{name: "templateValues", values: "x: 1\n", template: map[string]string{"sizes": "${ list 1 2 | toJson }", "zone": "${ .ClusterValues.dns.zone }"}, want: "sizes:\n- 1\n- 2\nx: 1\nzone: eu.example.com\n"},
		{name: "disablePreProcess", values: "env: ${ .ClusterLabels.env }\nb: global.fleet.clusterLabels.env\n", disable: true, want: "b: prod\nenv: ${ .ClusterLabels.env }\n"},
		{name: "a missing key is an error", values: "x: ${ .ClusterValues.nope }\n", err: "map has no entry for key"},
		{name: "env is not allowed", values: "x: ${ env \"HOME\" }\n", err: "function \"env\" not defined"},
		{name: "time is not allowed", values: "x: ${ now }\n", err: "function \"now\" not defined"},
		{name: "random is not allowed", values: "x: ${ randAlpha 5 }\n", err: "function \"randAlpha\" not defined"},
		{name: "DNS is not allowed", values: "x: ${ getHostByName \"example.com\" }\n", err: "not defined"},
		{name: "a huge repeat is refused", values: "x: ${ repeat 100000000 \"x\" }\n", err: "more than 10000"},
		{name: "a huge range is refused", values: "x: ${ range until 100000000 }x${ end }\n", err: "more than 10000"},
		{name: "output is bounded", values: "x: ${ range until 10000 }${ repeat 10000 \"x\" }${ end }\n", err: "writes more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]interface{}{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: values}, TemplateValues: tc.template, DisablePreProcess: tc.disable}}
			got, err := Template(opts, cluster)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, _ := yaml.Marshal(got.Helm.Values.Data)
			if string(out) != tc.want {
				t.Errorf("values:\n%s\nwant:\n%s", out, tc.want)
			}
			if opts.Helm.Values.Data["env"] != values["env"] {
				t.Error("Template changed its input")
			}
		})
	}
}
