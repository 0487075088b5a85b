package target

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Masterminds/sprig/v3"
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
		{name: "a dict cannot hold itself", values: "x: ${$d:=dict}${$_:=set $d \"a\" $d}${$d}\n", err: "cannot be put into itself"},
		{name: "a dict cannot hold a list that holds it", values: "x: ${$d:=dict}${$_:=set $d \"a\" (list 1 (dict \"b\" $d))}${$d}\n", err: "cannot be put into itself"},
		{name: "a dict cannot be merged into itself", values: "x: ${$d:=dict \"k\" 1}${$e:=dict \"d\" $d}${$_:=merge $d $e}${$d}\n", err: "cannot be put into itself"},
		{name: "set and merge still work", values: "x: ${$d:=dict}${$_:=set $d \"a\" 1}${$_:=merge $d (dict \"b\" 2)}${toJson $d}\n", want: "x:\n  a: 1\n  b: 2\n"},
		{name: "doubling a dict is bounded", values: "x: ${ $d := dict \"k\" (repeat 100 \"x\") }" + strings.Repeat("${ $d = dict \"a\" $d \"b\" $d }", 30) + "${ toJson $d | len }\n", err: "produce more than"},
		{name: "doubling a list is bounded", values: "x: ${ $l := list \"x\" }" + strings.Repeat("${ $l = list $l $l }", 40) + "${ $l }\n", err: "produce more than"},
		{name: "a dict nested too deep is refused", values: "x: ${ $d := dict }" + strings.Repeat("${ $d = dict \"a\" $d }", 60) + "${ $d }\n", err: "nested more than"},
		{name: "a long join separator is bounded", values: "x: ${ join (repeat 10000 \"x\") (until 10000) | len }\n", err: "produce more than"},
		{name: "wrapWith is bounded", values: "x: ${ wrapWith 1 (repeat 10000 \"y\") (repeat 10000 \"x\") | len }\n", err: "produce more than"},
		{name: "a printf verb naming one argument many times is bounded", values: "x: ${ printf \"" + strings.Repeat("%[1]v", 2000) + "\" (repeat 10000 \"x\") | len }\n", err: "produce more than"},
		{name: "mustRegexReplaceAll is bounded", values: "x: ${ mustRegexReplaceAll \"\" (repeat 10000 \"x\") (repeat 1000 \"y\") | len }\n", err: "produce more than"},
		{name: "a regex's $ cannot multiply its matches", values: "x: ${ regexReplaceAll \".*\" (repeat 10000 \"x\") (repeat 500 \"$0\") | len }\n", err: "produce more than"},
		{name: "a regex and its subject are bounded together", values: "x: ${ regexMatch (repeat 5000 \"a?\") (repeat 10000 \"a\") }\n", err: "regular expression of"},
		{name: "splitList of every byte is bounded", values: "x: ${ $s := repeat 10000 \"xxxxxxxxxx\" }${ splitList \"\" $s | len }\n", err: "produce more than"},
		{name: "splitList still splits", values: "x: ${ splitList \",\" \"a,b,c\" | toJson }\n", want: "x:\n- a\n- b\n- c\n"},
		{name: "regexFindAll is bounded", values: "x: ${ $s := repeat 10000 \"xxxxxxxxxx\" }${ regexFindAll \"x\" $s -1 | len }\n", err: "produce more than"},
		{name: "uniq cannot spin", values: "x: ${ $s := until 10000 }${ uniq $s | len }\n", err: "bytes of work"},
		{name: "uniq still works", values: "x: ${ uniq (list 1 1 2) | toJson }\n", want: "x:\n- 1\n- 2\n"},
		{name: "looking at a big value many times is bounded", values: "x: ${ $s := repeat 10000 \"xxxxxxxxxx\" }" + strings.Repeat("${ $_ := sha256sum $s }", 200) + "\n", err: "bytes of work"},
		{name: "buildCustomCert is not allowed", values: "x: ${ buildCustomCert \"a\" \"b\" }\n", err: "not defined"},
		{name: "YAML aliases in the output cannot blow up", values: "x: 1\n", template: map[string]string{"y": "${ \"a: &a [x,x,x,x,x,x,x,x,x]\\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\" }"}, err: "alias"},
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

// Every sprig function is either allowed, having been read for what it costs, or
// refused: a function a new sprig adds is neither until someone reads it.
func TestEverySprigFunctionIsClassified(t *testing.T) {
	known := map[string]bool{}
	for _, name := range append(append([]string{}, allowedFuncs...), refusedFuncs...) {
		if known[name] {
			t.Errorf("%s is listed twice", name)
		}
		known[name] = true
	}
	for name := range sprig.TxtFuncMap() {
		if !known[name] {
			t.Errorf("sprig's %s is neither in allowedFuncs nor in refusedFuncs", name)
		}
	}
	funcs := templateFuncs(newBudget())
	for _, name := range refusedFuncs {
		if _, ok := funcs[name]; ok {
			t.Errorf("%s is refused but defined", name)
		}
	}
}
