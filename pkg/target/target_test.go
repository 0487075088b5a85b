package target

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func cluster(name string, labels map[string]string) *fleet.Cluster {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters", Labels: labels}}
}

func group(name string, labels, selector map[string]string) *fleet.ClusterGroup {
	g := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters", Labels: labels}}
	if selector != nil {
		g.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return g
}

func sel(kv map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: kv} }

func TestClusters(t *testing.T) {
	clusters := []*fleet.Cluster{
		cluster("a", map[string]string{"env": "dev", "region": "eu"}),
		cluster("b", map[string]string{"env": "dev", "region": "us"}),
		cluster("c", map[string]string{"env": "prod", "region": "eu"}),
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other", Labels: map[string]string{"env": "dev"}}},
	}
	groups := []*fleet.ClusterGroup{
		group("europe", map[string]string{"kind": "geo"}, map[string]string{"region": "eu"}),
		group("none", nil, nil),
	}
	for name, tc := range map[string]struct {
		targets      []fleet.BundleTarget
		restrictions []fleet.BundleTargetRestriction
		want         string
	}{
		"by label":                   {targets: []fleet.BundleTarget{{ClusterSelector: sel(map[string]string{"env": "dev"})}}, want: "a,b"},
		"by name":                    {targets: []fleet.BundleTarget{{ClusterName: "c"}}, want: "c"},
		"by group":                   {targets: []fleet.BundleTarget{{ClusterGroup: "europe"}}, want: "a,c"},
		"by group selector":          {targets: []fleet.BundleTarget{{ClusterGroupSelector: sel(map[string]string{"kind": "geo"})}}, want: "a,c"},
		"group narrowed by selector": {targets: []fleet.BundleTarget{{ClusterGroup: "europe", ClusterSelector: sel(map[string]string{"env": "prod"})}}, want: "c"},
		"group without selector":     {targets: []fleet.BundleTarget{{ClusterGroup: "none"}}, want: ""},
		"empty selector takes all":   {targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}, want: "a,b,c"},
		"a target with no criteria":  {targets: []fleet.BundleTarget{{Name: "nothing"}}, want: ""},
		"doNotDeploy first wins": {targets: []fleet.BundleTarget{
			{ClusterName: "b", DoNotDeploy: true}, {ClusterSelector: sel(map[string]string{"env": "dev"})},
		}, want: "a"},
		"restrictions allow-list": {
			targets:      []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}},
			restrictions: []fleet.BundleTargetRestriction{{ClusterGroup: "europe"}},
			want:         "a,c",
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "clusters"},
				Spec: fleet.BundleSpec{Targets: tc.targets, TargetRestrictions: tc.restrictions}}
			got, err := Clusters(b, clusters, groups)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range got {
				names = append(names, g.Cluster.Name)
			}
			if strings.Join(names, ",") != tc.want {
				t.Errorf("got %v, want %s", names, tc.want)
			}
		})
	}
}

func TestTargetOptionsOverrideTheBundles(t *testing.T) {
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "clusters"},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: "app",
				Helm: &fleet.HelmOptions{ReleaseName: "app", Values: &fleet.GenericMap{Data: map[string]interface{}{
					"replicas": 1, "image": map[string]interface{}{"repository": "app", "tag": "1.0"},
				}}},
			},
			Targets: []fleet.BundleTarget{
				{Name: "prod", ClusterSelector: sel(map[string]string{"env": "prod"}), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
					Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{
						"replicas": 3, "image": map[string]interface{}{"tag": "1.1"},
					}}},
				}},
				{ClusterSelector: &metav1.LabelSelector{}},
			},
		},
	}
	got, err := Clusters(b, []*fleet.Cluster{cluster("p", map[string]string{"env": "prod"}), cluster("d", map[string]string{"env": "dev"})}, nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	prod, dev := got[0], got[1]
	if prod.TargetName != "prod" || dev.TargetName != "target001" {
		t.Errorf("target names %q %q", prod.TargetName, dev.TargetName)
	}
	v := prod.Options.Helm.Values.Data
	if v["replicas"] != float64(3) || v["image"].(map[string]interface{})["repository"] != "app" || v["image"].(map[string]interface{})["tag"] != "1.1" {
		t.Errorf("prod values %v", v)
	}
	if prod.Options.Helm.ReleaseName != "app" || prod.Options.DefaultNamespace != "app" {
		t.Errorf("prod lost the bundle's options: %+v", prod.Options)
	}
	if dev.Options.Helm.Values.Data["replicas"] != float64(1) {
		t.Errorf("dev values %v", dev.Options.Helm.Values.Data)
	}
	// The bundle itself is not changed by merging.
	if b.Spec.Helm.Values.Data["replicas"] != 1 {
		t.Errorf("merging changed the Bundle: %v", b.Spec.Helm.Values.Data)
	}

	idProd, _ := DeploymentID("s-abc", prod.Options)
	idDev, _ := DeploymentID("s-abc", dev.Options)
	idDevAgain, _ := DeploymentID("s-abc", dev.Options)
	idOther, _ := DeploymentID("s-def", dev.Options)
	if idProd == idDev || idDev != idDevAgain || idOther == idDev || !strings.HasPrefix(idDev, "s-abc:") {
		t.Errorf("deployment IDs %s %s %s %s", idProd, idDev, idDevAgain, idOther)
	}
}

func TestInvalidSelectorNamesTheTarget(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters"}, Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{
		ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Sideways"}}},
	}}}}
	_, err := Clusters(b, []*fleet.Cluster{cluster("a", nil)}, nil)
	if err == nil || !strings.Contains(err.Error(), "target000") {
		t.Fatalf("error %v", err)
	}
}

func TestTargetCustomizationMode(t *testing.T) {
	values := func(kv map[string]interface{}) fleet.BundleDeploymentOptions {
		return fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: kv}}}
	}
	targets := []fleet.BundleTarget{
		{Name: "eu", ClusterSelector: sel(map[string]string{"region": "eu"}), BundleDeploymentOptions: values(map[string]interface{}{"region": "eu", "size": "s"})},
		{Name: "prod", ClusterSelector: sel(map[string]string{"env": "prod"}), BundleDeploymentOptions: values(map[string]interface{}{"size": "l"})},
		{Name: "quiet", ClusterName: "q", DoNotDeploy: true},
		{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
	}
	clusters := []*fleet.Cluster{
		cluster("a", map[string]string{"region": "eu", "env": "prod"}),
		cluster("q", map[string]string{"region": "eu"}),
	}
	for _, tc := range []struct {
		mode fleet.TargetCustomizationMode
		want string
	}{
		{"", "a:eu:map[region:eu size:s] q:eu:map[region:eu size:s]"},
		{fleet.TargetCustomizationModeFirstMatch, "a:eu:map[region:eu size:s] q:eu:map[region:eu size:s]"},
		// Every match, merged in order; a doNotDeploy among them keeps the cluster out.
		{fleet.TargetCustomizationModeAllMatches, "a:eu,prod,all:map[region:eu size:l]"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "clusters"},
				Spec: fleet.BundleSpec{TargetCustomizationMode: tc.mode, Targets: targets}}
			got, err := Clusters(b, clusters, nil)
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, g := range got {
				parts = append(parts, fmt.Sprintf("%s:%s:%v", g.Cluster.Name, g.TargetName, g.Options.Helm.Values.Data))
			}
			if s := strings.Join(parts, " "); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}
