package target

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Bundle's targets are written by a bundle author, and a Cluster's labels partly by
// its agent: matching them never panics, whatever the selectors say, and a target
// selects only Clusters it names or whose labels its selector matches.
func FuzzTargets(f *testing.F) {
	f.Add("env", "In", "dev", "env", "dev", "c1", "", "g1")
	f.Add("env", "NotIn", "", "", "", "", "c1", "")
	f.Add("", "Exists", "x", "a/b", "!", "", "", "")
	f.Add("k", "Bogus", "v", "k", "v", "c", "c", "g")
	f.Fuzz(func(t *testing.T, key, operator, value, labelKey, labelValue, clusterName, targetName, group string) {
		selector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOperator(operator), Values: []string{value}},
		}}
		bundle := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ws"},
			Spec: fleet.BundleSpec{
				Targets: []fleet.BundleTarget{
					{ClusterSelector: selector},
					{ClusterName: targetName},
					{ClusterGroup: group},
					{ClusterGroupSelector: selector},
				},
				TargetRestrictions: []fleet.BundleTargetRestriction{{ClusterSelector: selector}},
			},
		}
		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: "ws", Labels: map[string]string{labelKey: labelValue}}}
		groups := []*fleet.ClusterGroup{{ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: "ws", Labels: map[string]string{labelKey: labelValue}},
			Spec: fleet.ClusterGroupSpec{Selector: selector}}}
		targets, err := Clusters(bundle, []*fleet.Cluster{cluster}, groups)
		if err != nil {
			return
		}
		if len(targets) > 1 {
			t.Fatalf("%d targets for one Cluster", len(targets))
		}
		_, _ = InGroup(groups[0], cluster)
		_ = SelectsByName(bundle)
		_ = SelectsByLabels(bundle)
	})
}

// fuzzArgs are what a fuzzed template passes to its functions besides its variables.
var fuzzArgs = []string{`"x"`, `""`, `"a,b"`, `3`, `-1`, `10000`, `"k"`, `.ClusterValues`, `.ClusterLabels`, `(repeat 1000 "y")`}

// fuzzTemplate turns data into a template: each three bytes call a function (chosen
// from all a template may call) on variables made before and fuzzArgs, and keep its
// result in a variable, so that chains of functions (a dict set into itself, a list
// of lists of lists, a join of a repeat) are tried, not only strings that do not
// parse.
func fuzzTemplate(data []byte) string {
	funcs := templateFuncs(newBudget())
	names := templateFuncNames()
	var sb strings.Builder
	sb.WriteString("${ $v0 := dict }")
	vars := 1
	for i := 0; i+2 < len(data) && i < 3*64; i += 3 {
		name := names[int(data[i])%len(names)]
		fn := reflect.TypeOf(funcs[name])
		fmt.Fprintf(&sb, "${ $v%d := %s", vars, name)
		arity := fn.NumIn()
		if fn.IsVariadic() {
			arity += int(data[i+1] % 3)
		}
		for a := 0; a < arity; a++ {
			pick := int(data[i+1]>>2+data[i+2]*byte(a+1)) % (vars + len(fuzzArgs))
			if pick < vars {
				fmt.Fprintf(&sb, " $v%d", pick)
			} else {
				sb.WriteString(" " + fuzzArgs[pick-vars])
			}
		}
		sb.WriteString(" }")
		vars++
	}
	fmt.Fprintf(&sb, "${ $v%d }", vars-1)
	return sb.String()
}

// Templates are written by bundle authors and run in the hub: whatever they call,
// templating one cluster allocates a bounded amount and never recurses deep enough to
// overflow a stack (a stack overflow kills the process, and the fuzzer reports it).
func FuzzTemplateBounded(f *testing.F) {
	f.Add([]byte{0, 0, 0})
	for _, name := range []string{"set", "merge", "list", "dict", "join", "wrapWith", "printf", "toJson", "repeat", "uniq", "splitList"} {
		for i, n := range templateFuncNames() {
			if n == name {
				f.Add([]byte{byte(i), 0, 1, byte(i), 4, 2, byte(i), 8, 3, byte(i), 1, 1})
			}
		}
	}
	debug.SetMaxStack(64 << 20)
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ws", Labels: map[string]string{"env": "dev"}},
		Spec:       fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"a": map[string]interface{}{"b": "c"}}}},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text := fuzzTemplate(data)
		opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{TemplateValues: map[string]string{"x": text}}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = Template(opts, cluster)
		runtime.ReadMemStats(&after)
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 256<<20 {
			t.Fatalf("templating %q allocated %d MiB", text, allocated>>20)
		}
	})
}

func templateFuncNames() []string {
	funcs := templateFuncs(newBudget())
	names := make([]string, 0, len(funcs))
	for name := range funcs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
