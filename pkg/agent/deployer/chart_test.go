package deployer

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// render renders a chart as `helm template` would.
func render(t *testing.T, files map[string]string, opts fleet.BundleDeploymentOptions) string {
	t.Helper()
	raw := map[string][]byte{}
	for k, v := range files {
		raw[k] = []byte(v)
	}
	c, err := Chart(raw, opts, "rel")
	if err != nil {
		t.Fatal(err)
	}
	values, err := Values(raw, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(&action.Configuration{})
	in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, "rel", "ns"
	in.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rel, err := in.Run(c, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Manifest
}

func TestPlainManifestsAreRenderedAsTheyAre(t *testing.T) {
	out := render(t, map[string]string{
		"a/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"{{ not a template }}\"\n",
		"b.yml":         "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"README.md":     "not a manifest",
		"fleet.yaml":    "defaultNamespace: x",
	}, fleet.BundleDeploymentOptions{})
	for _, want := range []string{"name: a", "name: b", "name: c", "{{ not a template }}"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered manifests lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not a manifest") || strings.Contains(out, "defaultNamespace") {
		t.Errorf("non-manifest files rendered:\n%s", out)
	}
}

func TestChartValuesLayering(t *testing.T) {
	files := map[string]string{
		"chart/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 1.0.0\n",
		"chart/values.yaml":       "a: chart\nb: chart\nc: chart\n",
		"chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: {{ .Values.a }}\n  b: {{ .Values.b }}\n  c: {{ .Values.c }}\n",
		"extra-values.yaml":       "b: file\nc: file\n",
	}
	out := render(t, files, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
		Chart: "chart", ValuesFiles: []string{"extra-values.yaml"}, Values: &fleet.GenericMap{Data: map[string]interface{}{"c": "bundle"}},
	}})
	for _, want := range []string{"a: chart", "b: file", "c: bundle"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q:\n%s", want, out)
		}
	}
}

func TestChartErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string][]byte
		opts  fleet.BundleDeploymentOptions
		want  string
	}{
		"repository chart": {map[string][]byte{"x.yaml": nil}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "nginx", Repo: "https://charts.example.com"}}, "not downloaded"},
		"missing chart":    {map[string][]byte{"x.yaml": nil}, fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "chart"}}, "no Chart.yaml"},
		"nothing":          {map[string][]byte{"README.md": nil}, fleet.BundleDeploymentOptions{}, "no Chart.yaml and no"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Chart(tc.files, tc.opts, "rel")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
