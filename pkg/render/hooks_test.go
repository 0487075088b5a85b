package render

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestPlaceHook(t *testing.T) {
	info := func(kind, ns string, hook, clusterScoped bool) *resource.Info {
		u := &unstructured.Unstructured{}
		u.SetKind(kind)
		u.SetName("x")
		u.SetNamespace(ns)
		if hook {
			u.SetAnnotations(map[string]string{"helm.sh/hook": "pre-install"})
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped {
			scope = meta.RESTScopeRoot
		}
		return &resource.Info{Object: u, Namespace: ns, Mapping: &meta.RESTMapping{Scope: scope}}
	}
	for _, tc := range []struct {
		name    string
		info    *resource.Info
		wantNS  string
		wantErr string
	}{
		{"a hook moves to targetNamespace", info("ConfigMap", "elsewhere", true, false), "team", ""},
		{"a hook without a namespace gets it", info("ConfigMap", "", true, false), "team", ""},
		{"a cluster-scoped hook is refused", info("ClusterRole", "", true, true), "", "hook ClusterRole x is cluster-scoped"},
		{"an object that is no hook is left as it is", info("ConfigMap", "elsewhere", false, false), "elsewhere", ""},
		{"a cluster-scoped object that is no hook is left to the post-renderer", info("ClusterRole", "", false, true), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := placeHook(tc.info, "team")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tc.info.Object.(*unstructured.Unstructured).GetNamespace()
			if got != tc.wantNS || tc.info.Namespace != tc.wantNS {
				t.Fatalf("namespace %q (info %q), want %q", got, tc.info.Namespace, tc.wantNS)
			}
		})
	}
}

func TestWithHooksOnlyWrapsUnderTargetNamespace(t *testing.T) {
	cfg := &action.Configuration{KubeClient: &kube.Client{}}
	for _, tc := range []struct {
		name    string
		opts    fleet.BundleDeploymentOptions
		wrapped bool
	}{
		{"no namespace option", fleet.BundleDeploymentOptions{}, false},
		{"defaultNamespace keeps hooks' own namespaces", fleet.BundleDeploymentOptions{DefaultNamespace: "a"}, false},
		{"targetNamespace", fleet.BundleDeploymentOptions{TargetNamespace: "a"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := (&PostRenderer{Options: tc.opts}).WithHooks(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, wrapped := out.KubeClient.(*hookClient); wrapped != tc.wrapped {
				t.Fatalf("client %T, wrapped %v, want %v", out.KubeClient, wrapped, tc.wrapped)
			}
			if _, same := cfg.KubeClient.(*kube.Client); !same {
				t.Fatal("the configuration given was changed")
			}
		})
	}
}

func TestCheckCRDs(t *testing.T) {
	withCRD := &chart.Chart{Metadata: &chart.Metadata{Name: "c"}, Files: []*chart.File{{Name: "crds/widget.yaml", Data: []byte("kind: CustomResourceDefinition\n")}}}
	plain := &chart.Chart{Metadata: &chart.Metadata{Name: "c"}}
	for _, tc := range []struct {
		name    string
		chart   *chart.Chart
		ns      string
		wantErr string
	}{
		{"crds/ under targetNamespace is refused", withCRD, "team", "crds/widget.yaml holds CustomResourceDefinitions"},
		{"crds/ without targetNamespace is installed", withCRD, "", ""},
		{"no crds/ under targetNamespace", plain, "team", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCRDs(tc.chart, tc.ns)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
