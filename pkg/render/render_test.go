package render

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
)

func bytesOf(files map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range files {
		out[k] = []byte(v)
	}
	return out
}

// template renders files for opts as `hub test` does.
func template(t *testing.T, files map[string]string, opts fleet.BundleDeploymentOptions) (string, error) {
	t.Helper()
	r, err := New(bytesOf(files), opts, "rel", nil)
	if err != nil {
		return "", err
	}
	return Template(context.Background(), r, "ns", "rel")
}

func mustTemplate(t *testing.T, files map[string]string, opts fleet.BundleDeploymentOptions) string {
	t.Helper()
	out, err := template(t, files, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cm(name, extra string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + extra
}

func TestPlainManifestsAreDeployedAsTheyAre(t *testing.T) {
	out := mustTemplate(t, map[string]string{
		"a/config.yaml":      cm("a", "data:\n  x: \"{{ not a template }}\"\n"),
		"b.yml":              "---\n" + cm("b", "") + "---\n" + cm("c", ""),
		"templates/t.yaml":   cm("t", "data:\n  release: {{ .Release.Name }}\n"),
		"README.md":          "not a manifest",
		"fleet.yaml":         "defaultNamespace: x",
		"other/fleet.yaml":   "{}",
		"other/skipped.yaml": cm("skipped", ""),
		"chart/Chart.yaml":   "name: c",
		"chart/x.yaml":       cm("in-a-chart", ""),
	}, fleet.BundleDeploymentOptions{})
	for _, want := range []string{"name: a", "name: b", "name: c", "{{ not a template }}", "release: rel"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered manifests lack %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"not a manifest", "defaultNamespace", "skipped", "in-a-chart"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("rendered manifests hold %q:\n%s", unwanted, out)
		}
	}
}

func TestChartValuesLayering(t *testing.T) {
	out := mustTemplate(t, map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"chart/values.yaml":       "a: chart\nb: chart\nc: chart\n",
		"chart/templates/cm.yaml": cm("cm", "data:\n  a: {{ .Values.a }}\n  b: {{ .Values.b }}\n  c: {{ .Values.c }}\n"),
		"extra-values.yaml":       "b: file\nc: file\n",
	}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
		Chart: "chart", ValuesFiles: []string{"extra-values.yaml"}, Values: &fleet.GenericMap{Data: map[string]interface{}{"c": "bundle"}},
	}})
	for _, want := range []string{"a: chart", "b: file", "c: bundle"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q:\n%s", want, out)
		}
	}
}

func TestADownloadedChartIsFoundByItsOptions(t *testing.T) {
	h := &fleet.HelmOptions{Chart: "guestbook", Repo: "https://charts.example.com/", Version: "1.0.0"}
	folder := bundlereader.ChartFolder(h)
	files := map[string]string{
		folder + "/guestbook/Chart.yaml":        "apiVersion: v2\nname: guestbook\nversion: 1.0.0\n",
		folder + "/guestbook/templates/cm.yaml": cm("from-the-repository", ""),
		"cm.yaml":                               cm("beside", ""),
	}
	out := mustTemplate(t, files, fleet.BundleDeploymentOptions{Helm: h})
	if !strings.Contains(out, "from-the-repository") || strings.Contains(out, "beside") {
		t.Errorf("want the downloaded chart alone:\n%s", out)
	}
	other := *h
	other.Version = "2.0.0"
	_, err := template(t, files, fleet.BundleDeploymentOptions{Helm: &other})
	if err == nil || !strings.Contains(err.Error(), "charts are downloaded when the Bundle is made") {
		t.Errorf("error %v: options naming a chart the Bundle does not hold must be refused", err)
	}
}

func TestChartErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		opts  fleet.BundleDeploymentOptions
		want  string
	}{
		"a repository chart not downloaded": {map[string]string{"x.yaml": ""}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "nginx", Repo: "https://charts.example.com"}}, "charts are downloaded when the Bundle is made"},
		"a missing chart folder":            {map[string]string{"x.yaml": ""}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "chart"}}, "no Chart.yaml"},
		"a missing overlay":                 {map[string]string{"x.yaml": ""}, fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}}, "no folder overlays/prod"},
		"a patch of nothing":                {map[string]string{"x.yaml": "", "overlays/prod/y_patch.yaml": "a: 1"}, fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}}, "y.yaml, which is not among"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := template(t, tc.files, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStyleOf(t *testing.T) {
	h := &fleet.HelmOptions{Chart: "https://example.com/c.tgz"}
	ext := bundlereader.ChartFolder(h)
	cases := []struct {
		name  string
		files []string
		opts  fleet.BundleDeploymentOptions
		want  Style
	}{
		{"plain manifests", []string{"a.yaml"}, fleet.BundleDeploymentOptions{}, Style{}},
		{"a chart at the top", []string{"Chart.yaml", "templates/a.yaml"}, fleet.BundleDeploymentOptions{}, Style{ChartDir: "."}},
		{"a chart in a folder", []string{"c/Chart.yaml"}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "c"}}, Style{ChartDir: "c"}},
		{"a chart elsewhere is not taken", []string{"c/Chart.yaml"}, fleet.BundleDeploymentOptions{}, Style{}},
		{"a downloaded chart", []string{ext + "/c/Chart.yaml"}, fleet.BundleDeploymentOptions{Helm: h}, Style{ChartDir: ext + "/c"}},
		{"a local chart wins", []string{ext + "/c/Chart.yaml", "Chart.yaml"}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{}}, Style{ChartDir: "."}},
		{"a kustomization at the top", []string{"kustomization.yaml"}, fleet.BundleDeploymentOptions{}, Style{Kustomization: "kustomization.yaml"}},
		{"a kustomization in kustomize.dir", []string{"kustomization.yaml", "overlays/dev/kustomization.yaml"}, fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "overlays/dev"}}, Style{Kustomization: "overlays/dev/kustomization.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for _, f := range tc.files {
				files[f] = nil
			}
			if got := StyleOf(files, tc.opts); got != tc.want {
				t.Errorf("StyleOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOverlaysReplaceAndPatch(t *testing.T) {
	out := mustTemplate(t, map[string]string{
		"a.yaml":                    cm("a", "data:\n  x: base\n  y: base\n"),
		"b.yaml":                    cm("b", "data:\n  x: base\n"),
		"overlays/one/a_patch.yaml": "data:\n  z: patched\n",
		"overlays/two/b.yaml":       cm("b", "data:\n  x: replaced\n"),
	}, fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"one", "two"}}})
	for _, want := range []string{"x: base", "z: patched", "x: replaced"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "z: base") || strings.Contains(out, "_patch") {
		t.Errorf("overlays not applied:\n%s", out)
	}
}

func TestKustomizeRunsOverHelmOutput(t *testing.T) {
	out := mustTemplate(t, map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"chart/templates/cm.yaml": cm("from-helm", "data:\n  x: helm\n"),
		"k/kustomization.yaml":    "namePrefix: kz-\ncommonLabels:\n  via: kustomize\n",
	}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "chart"}, Kustomize: &fleet.KustomizeOptions{Dir: "k"}})
	if !strings.Contains(out, "name: kz-from-helm") || !strings.Contains(out, "via: kustomize") {
		t.Errorf("kustomize did not run over Helm's output:\n%s", out)
	}
}

// TestKustomizeReadsOnlyTheBundlesFiles: kustomize fetches resources named by URL
// and clones bases named by Git URL; a Bundle's author must not make the agent do so.
func TestKustomizeReadsOnlyTheBundlesFiles(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(cm("fetched", "")))
	}))
	defer srv.Close()
	for name, kustomization := range map[string]string{
		"a resource by URL":                 "resources:\n- " + srv.URL + "/cm.yaml\n",
		"a Git base":                        "resources:\n- github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v3.3.1\n",
		"an scp-style Git base":             "bases:\n- git@github.com:owner/repo.git\n",
		"a path out of the Bundle":          "resources:\n- ../../../../etc/kubernetes/admin.conf\n",
		"an absolute path":                  "resources:\n- /etc/passwd\n",
		"a generator reading a file":        "configMapGenerator:\n- name: x\n  files:\n  - key=/etc/shadow\n",
		"a component by URL":                "components:\n- " + srv.URL + "/component\n",
		"Helm inflation":                    "helmCharts:\n- name: x\n  repo: " + srv.URL + "\n",
		"a patch file out of the Bundle":    "patches:\n- path: ../outside.yaml\n",
		"an OpenAPI schema by URL":          "resources:\n- cm.yaml\nopenapi:\n  path: " + srv.URL + "/schema.json\n",
		"field names in another case":       "Resources:\n- " + srv.URL + "/cm.yaml\n",
		"a generator file by URL, any case": "ConfigMapGenerator:\n- name: leak\n  Files: [creds=" + srv.URL + "/creds]\n",
		"an inline generator":               "generators:\n- |\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata: {name: leak}\n  files: [k=" + srv.URL + "/x]\n",
		"an inline transformer":             "transformers:\n- '{apiVersion: builtin, kind: PatchTransformer, metadata: {name: p}, path: \"" + srv.URL + "/p.yaml\"}'\n",
		"env, singular":                     "configMapGenerator:\n- name: x\n  env: " + srv.URL + "/x.env\n",
		"a braced file source":              "configMapGenerator:\n- name: x\n  files: [\"{k=" + srv.URL + "/x\"]\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := template(t, map[string]string{"base/kustomization.yaml": kustomization, "base/cm.yaml": cm("x", "")},
				fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "base"}})
			if err == nil {
				t.Fatal("built; want it refused")
			}
			if !strings.Contains(err.Error(), "not a file of the Bundle") && !strings.Contains(err.Error(), "helmCharts is not supported") {
				t.Errorf("error %v, want one saying kustomize reads only the Bundle's files", err)
			}
		})
	}
	// A folder of the Bundle named like a Git repository is not handed to kustomize,
	// which would clone it rather than read it.
	for _, name := range []string{"github.com/attacker/repo", "repo.git"} {
		_, err := template(t, map[string]string{
			"base/kustomization.yaml":              "resources:\n- " + name + "\n",
			"base/" + name + "/kustomization.yaml": "resources: [cm.yaml]\n",
			"base/" + name + "/cm.yaml":            cm("x", ""),
		}, fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "base"}})
		if err == nil || !strings.Contains(err.Error(), "would clone") {
			t.Errorf("%s: error %v, want it refused", name, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the server was asked %d times", hits.Load())
	}
	out := mustTemplate(t, map[string]string{
		"base/kustomization.yaml":    "resources:\n- cm.yaml\n",
		"base/cm.yaml":               cm("base", ""),
		"overlay/kustomization.yaml": "resources:\n- ../base\nnameSuffix: -dev\n",
	}, fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "overlay"}})
	if !strings.Contains(out, "name: base-dev") {
		t.Errorf("a base inside the Bundle must still work:\n%s", out)
	}
}

func TestTargetNamespaceRefusesClusterScopedObjects(t *testing.T) {
	files := bytesOf(map[string]string{
		"cm.yaml":   cm("a", ""),
		"role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n",
	})
	opts := fleet.BundleDeploymentOptions{TargetNamespace: "team"}
	r, err := New(files, opts, "rel", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.PostRenderer.ClusterScoped = func(gvk schema.GroupVersionKind) (bool, error) { return gvk.Kind == "ClusterRole", nil }
	_, err = Template(context.Background(), r, "team", "rel")
	if err == nil || !strings.Contains(err.Error(), "ClusterRole r is cluster-scoped") {
		t.Fatalf("error %v, want the ClusterRole refused", err)
	}
	delete(files, "role.yaml")
	r, err = New(files, opts, "rel", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Template(context.Background(), r, "team", "rel")
	if err != nil || !strings.Contains(out, "namespace: team") {
		t.Fatalf("%v: want the ConfigMap in namespace team:\n%s", err, out)
	}
}

func TestOverlayPatchesCannotGrowWithoutBound(t *testing.T) {
	var ops []string
	ops = append(ops, `{"op": "add", "path": "/data/b0", "value": "`+strings.Repeat("x", 1000)+`"}`)
	for i := 1; i < 40; i++ {
		ops = append(ops, fmt.Sprintf(`{"op": "copy", "from": "/data", "path": "/data/b%d"}`, i))
	}
	_, err := template(t, map[string]string{
		"cm.yaml":                    cm("a", "data:\n  x: y\n"),
		"overlays/big/cm_patch.yaml": "[" + strings.Join(ops, ",") + "]",
	}, fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"big"}}})
	if err == nil || !strings.Contains(err.Error(), "copy") {
		t.Fatalf("error %v, want the copies refused", err)
	}
}
