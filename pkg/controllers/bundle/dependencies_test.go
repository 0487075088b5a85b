package bundle

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func dependent(name string, labels map[string]string, refs ...fleet.BundleRef) *fleet.Bundle {
	return &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ws", Labels: labels}, Spec: fleet.BundleSpec{DependsOn: refs}}
}

func TestCheckDependsOn(t *testing.T) {
	byName := func(n string) fleet.BundleRef { return fleet.BundleRef{Name: n} }
	byLabel := func(k, v string) fleet.BundleRef {
		return fleet.BundleRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}
	}
	tier := func(v string) map[string]string { return map[string]string{"tier": v} }
	for _, tc := range []struct {
		name   string
		bundle *fleet.Bundle
		others []*fleet.Bundle
		want   string
	}{
		{"no dependencies", dependent("app", nil), nil, ""},
		{"a chain", dependent("app", nil, byName("db")), []*fleet.Bundle{dependent("db", nil, byName("crds")), dependent("crds", nil)}, ""},
		{"a dependency that does not exist yet", dependent("app", nil, byName("db")), nil, ""},
		{"itself by name", dependent("app", nil, byName("app")), nil, "cycle: app → app"},
		{"a selector matching itself too", dependent("app", tier("web"), byLabel("tier", "web")), []*fleet.Bundle{dependent("web2", tier("web"))}, ""},
		{"a cycle of three", dependent("a", nil, byName("b")), []*fleet.Bundle{dependent("b", nil, byName("c")), dependent("c", nil, byName("a"))}, "cycle: a → b → c → a"},
		{"a cycle through a selector", dependent("app", tier("web"), byLabel("tier", "db")),
			[]*fleet.Bundle{dependent("db", tier("db"), byLabel("tier", "web"))}, "cycle: app → db → app"},
		{"a cycle elsewhere is the others' business", dependent("app", nil, byName("a")),
			[]*fleet.Bundle{dependent("a", nil, byName("b")), dependent("b", nil, byName("a"))}, ""},
		{"another namespace does not count", dependent("a", nil, byName("b")),
			[]*fleet.Bundle{{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "other"}, Spec: fleet.BundleSpec{DependsOn: []fleet.BundleRef{byName("a")}}}}, ""},
		{"an empty reference", dependent("app", nil, fleet.BundleRef{}), nil, "spec.dependsOn[0]: neither name nor selector"},
		{"an invalid selector", dependent("app", nil, fleet.BundleRef{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sideways"}}}}), nil, "spec.dependsOn[0]: invalid selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDependsOn(tc.bundle, append(tc.others, tc.bundle))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
