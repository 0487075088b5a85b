package target

import (
	"fmt"
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
		{name: "a huge repeat is refused", values: "x: ${ repeat 100000000 \"x\" }\n", err: "not between 0 and 10000"},
		{name: "a huge until is refused", values: "x: ${ until 100000000 | len }\n", err: "not between 0 and 10000"},
		{name: "range is refused", values: "x: ${ range 1000000000000 }${ end }\n", err: "range is not allowed"},
		{name: "a negative count is refused", values: "x: ${ len (until -9223372036854775807) }\n", err: "not between 0 and 10000"},
		{name: "untilStep cannot overflow", values: "x: ${ untilStep -9223372036854775808 9223372036854775807 1 }\n", err: "more than 10000 steps"},
		{name: "untilStep near the top", values: "x: ${ untilStep 9223372036854775800 9223372036854775807 100 }\n", err: "more than 10000 steps"},
		{name: "recursion is refused", values: "x: ${ define \"f\" }${ template \"f\" }${ template \"f\" }${ end }${ template \"f\" }\n", err: "not allowed"},
		{name: "a repeat of repeats is bounded", values: "x: ${ $a := repeat 10000 \"xxxxxxxxxx\" }${ $b := repeat 10000 $a }${ len $b }\n", err: "produce more than"},
		{name: "doubling a string is bounded", values: "x: ${ $s := repeat 1000 \"x\" }" + strings.Repeat("${ $s = print $s $s }", 20) + "${ len $s }\n", err: "produce more than"},
		{name: "a wide printf is refused", values: "x: ${ printf \"%1000000d\" 1 }\n", err: "widths and precisions"},
		{name: "replace cannot blow up", values: "x: ${ replace \"\" (repeat 1000 \"y\") (repeat 2000 \"z\") }\n", err: "produce more than"},
		{name: "the budget is per cluster, not per template", values: "a: 1\n", template: manyTemplates(20, "${ repeat 10000 (repeat 10 \"x\") }"), err: "produce more than"},
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

func manyTemplates(n int, text string) map[string]string {
	out := map[string]string{}
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("k%d", i)] = text
	}
	return out
}
