package bundlereader

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
)

func TestChartDependenciesAreDownloadedWhenTheBundleIsMade(t *testing.T) {
	var hits atomic.Int32
	sub := chartArchive(t, map[string]string{"sub/Chart.yaml": "apiVersion: v2\nname: sub\nversion: 1.2.0\n", "sub/templates/cm.yaml": "kind: ConfigMap\n"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  sub:\n  - {apiVersion: v2, name: sub, version: 1.2.0, urls: [sub-1.2.0.tgz]}\n  - {apiVersion: v2, name: sub, version: 2.0.0, urls: [sub-2.0.0.tgz]}\n"))
		case "/sub-1.2.0.tgz":
			_, _ = w.Write(sub)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	chartYAML := "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: ^1.0.0\n  repository: " + srv.URL + "\n- name: local\n  version: 0.1.0\n  repository: file://../local\n- name: vendored\n  version: 1.0.0\n  repository: https://charts.example.com\n"
	files := map[string]string{
		"app/Chart.yaml":                 chartYAML,
		"app/charts/vendored/Chart.yaml": "apiVersion: v2\nname: vendored\nversion: 1.0.0\n",
		"local/Chart.yaml":               "apiVersion: v2\nname: local\nversion: 0.1.0\n",
		"local/templates/x.yaml":         "kind: Secret\n",
		"fleet.yaml":                     "helm:\n  chart: app\n",
	}

	b, err := Read(context.Background(), "x", folder(t, files), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range b.Spec.Resources {
		if strings.HasPrefix(r.Name, "app/charts/") && strings.HasSuffix(r.Name, ".tgz") {
			got[r.Name] = r.Content
		}
	}
	if len(got) != 2 || got["app/charts/sub-1.2.0.tgz"] == "" || got["app/charts/local-0.1.0.tgz"] == "" {
		t.Fatalf("archives %v, want sub-1.2.0 (the newest ^1.0.0) and local-0.1.0; vendored is there already", slices.Sorted(maps.Keys(got)))
	}
	decoded, err := content.Files([]fleet.BundleResource{{Name: "x.tgz", Content: got["app/charts/local-0.1.0.tgz"], Encoding: "base64+gz"}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := content.Unpack(decoded["x.tgz"], 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inner["local/templates/x.yaml"]; !ok {
		t.Errorf("the packed file:// chart holds %v", slices.Sorted(maps.Keys(inner)))
	}

	hits.Store(0)
	files["fleet.yaml"] = "helm:\n  chart: app\n  disableDependencyUpdate: true\n"
	b, err = Read(context.Background(), "x", folder(t, files), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range b.Spec.Resources {
		if strings.HasSuffix(r.Name, ".tgz") {
			t.Errorf("%s added with disableDependencyUpdate", r.Name)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests with disableDependencyUpdate", hits.Load())
	}

	files["fleet.yaml"] = "helm:\n  chart: app\n"
	files["app/Chart.yaml"] = "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: escape\n  version: 0.1.0\n  repository: file://../../../etc\n"
	if _, err := Read(context.Background(), "x", folder(t, files), Options{}); err == nil || !strings.Contains(err.Error(), "leaves the folder") {
		t.Fatalf("error %v, want a file:// repository out of the folder refused", err)
	}
}
