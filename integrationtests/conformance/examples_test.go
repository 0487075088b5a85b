package conformance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
)

// examplesDir is the copy of rancher/fleet-examples, as an absolute path: tests
// run commands inside example folders.
var examplesDir = func() string {
	dir, err := filepath.Abs("testdata/fleet-examples")
	if err != nil {
		panic(err)
	}
	return dir
}()

// example is one case of tests/expected: an example folder and what Fleet made of it.
type example struct {
	// Case is "single-cluster/helm", ...
	Case string
	// Namespace is the workspace tests/test.sh applies it to.
	Namespace string
	// Envs are the environments tests/test.sh renders it for (label env=...), none
	// for single-cluster examples, which it renders once per environment without labels.
	MultiCluster bool
}

func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, kind := range []string{"single-cluster", "multi-cluster"} {
		entries, err := os.ReadDir(filepath.Join(examplesDir, "tests/expected", kind))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			ex := example{Case: kind + "/" + e.Name(), Namespace: "fleet-local"}
			if kind == "multi-cluster" {
				ex.Namespace, ex.MultiCluster = "fleet-default", true
			}
			out = append(out, ex)
		}
	}
	if len(out) != 10 {
		t.Fatalf("found %d examples in %s, want the 10 of fleet-examples f934ca4", len(out), examplesDir)
	}
	return out
}

// expectedBundles are the Bundles of tests/expected/<case>/bundle.yaml. Fleet v0.9
// wrote several Bundles there without document separators.
func expectedBundles(t *testing.T, c string) []*fleet.Bundle {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examplesDir, "tests/expected", c, "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := regexp.MustCompile(`(?m)^(?:---\n)?apiVersion: `).Split(string(data), -1)
	var out []*fleet.Bundle
	for _, doc := range docs {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		b := &fleet.Bundle{}
		if err := yaml.UnmarshalStrict([]byte("apiVersion: "+doc), b); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		out = append(out, b)
	}
	return out
}

// decoded is the content of r as text.
func decoded(t *testing.T, r fleet.BundleResource) string {
	t.Helper()
	switch r.Encoding {
	case "":
		return r.Content
	case "base64+gz":
		raw, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	t.Fatalf("resource %s: encoding %q", r.Name, r.Encoding)
	return ""
}

// chartRepository serves, at /<host>/<path>, the charts Fleet downloaded for the
// examples from https://<host>/<path>: rebuilt from the files Fleet stored in the
// expected Bundles (github.com and charts.rancher.io cannot be reached from here).
// Chart URLs are served as archives; chart repositories get an index.yaml.
type chartRepository struct {
	*httptest.Server
	files map[string][]byte
	// guestbook is the chart of helm-external, also served at /private/ to user u
	// with password p.
	guestbook []byte
}

func newChartRepository(t *testing.T) *chartRepository {
	t.Helper()
	repo := &chartRepository{files: map[string][]byte{}}
	indexes := map[string]map[string][]map[string]interface{}{}
	for _, ex := range examples(t) {
		for _, b := range expectedBundles(t, ex.Case) {
			for _, h := range helmOptions(&b.Spec) {
				if h.Chart == "" && h.Repo == "" {
					continue
				}
				folder := bundlereader.ChartFolder(h) + "/"
				chart := map[string][]byte{}
				for _, r := range b.Spec.Resources {
					if rest, ok := strings.CutPrefix(r.Name, folder); ok {
						chart[rest] = []byte(decoded(t, r))
					}
				}
				if len(chart) == 0 {
					continue
				}
				archive := tarGz(t, chart)
				if h.Repo == "" {
					repo.files[strings.TrimPrefix(h.Chart, "https://")] = archive
					continue
				}
				host := strings.TrimPrefix(h.Repo, "https://")
				file := fmt.Sprintf("%s-%s.tgz", h.Chart, h.Version)
				repo.files[path.Join(host, file)] = archive
				if indexes[host] == nil {
					indexes[host] = map[string][]map[string]interface{}{}
				}
				indexes[host][h.Chart] = []map[string]interface{}{{
					"apiVersion": "v2", "name": h.Chart, "version": h.Version, "urls": []string{file},
				}}
			}
		}
	}
	for host, entries := range indexes {
		index, err := yaml.Marshal(map[string]interface{}{"apiVersion": "v1", "entries": entries})
		if err != nil {
			t.Fatal(err)
		}
		repo.files[path.Join(host, "index.yaml")] = index
	}
	// A private repository (user u, password p) with the guestbook chart.
	guestbook := repo.files["github.com/rancher/fleet-examples/releases/download/example/guestbook-0.0.1.tgz"]
	if guestbook == nil {
		t.Fatal("no guestbook chart among Fleet's expected Bundles")
	}
	repo.guestbook = guestbook
	repo.files["private/guestbook-0.0.1.tgz"] = guestbook
	repo.files["private/index.yaml"] = []byte("apiVersion: v1\nentries:\n  guestbook:\n  - apiVersion: v2\n    name: guestbook\n    version: 0.0.1\n    urls: [guestbook-0.0.1.tgz]\n")
	repo.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/private/") {
			if user, pass, ok := r.BasicAuth(); !ok || user != "u" || pass != "p" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		data, ok := repo.files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(repo.Close)
	return repo
}

// tarGz packs files into a chart archive.
func tarGz(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func helmOptions(spec *fleet.BundleSpec) []*fleet.HelmOptions {
	var out []*fleet.HelmOptions
	if spec.Helm != nil {
		out = append(out, spec.Helm)
	}
	for i := range spec.Targets {
		if spec.Targets[i].Helm != nil {
			out = append(out, spec.Targets[i].Helm)
		}
	}
	return out
}

// localExample copies the example c to a new folder whose fleet.yaml files name
// repo instead of https:// servers, and returns it.
func localExample(t *testing.T, c string, repo *chartRepository) string {
	t.Helper()
	src := filepath.Join(examplesDir, c)
	dst := filepath.Join(t.TempDir(), path.Base(c))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if d.Name() == "fleet.yaml" {
			data = bytes.ReplaceAll(data, []byte("https://"), []byte(repo.URL+"/"))
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// comparable is b as generic data, ready to compare with what Fleet made:
// resources decoded (how gzip compresses differs between programs; whether a file
// is compressed is kept), the changes of localExample undone (the URLs, and the
// chart folders named after them), and empty objects dropped (Fleet v0.9 wrote
// "correctDrift: {}" and "ignore: {}" where nothing was set).
func comparable(t *testing.T, b *fleet.Bundle, repo *chartRepository) map[string]interface{} {
	t.Helper()
	b = b.DeepCopy()
	for i, r := range b.Spec.Resources {
		b.Spec.Resources[i].Content = decoded(t, r)
		if r.Encoding != "" {
			b.Spec.Resources[i].Encoding = "compressed"
		}
	}
	b.Status = fleet.BundleStatus{}
	var renames []string
	if repo != nil {
		for _, h := range helmOptions(&b.Spec) {
			original := h.DeepCopy()
			original.Chart = strings.ReplaceAll(original.Chart, repo.URL+"/", "https://")
			original.Repo = strings.ReplaceAll(original.Repo, repo.URL+"/", "https://")
			renames = append(renames, bundlereader.ChartFolder(h), bundlereader.ChartFolder(original))
		}
		renames = append(renames, repo.URL+"/", "https://")
	}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(renames) > 0 {
		data = []byte(strings.NewReplacer(renames...).Replace(string(data)))
	}
	var out map[string]interface{}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	delete(out, "status")
	dropEmpty(out)
	return out
}

// dropEmpty removes empty objects from m, recursively.
func dropEmpty(v interface{}) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			if dropEmpty(e) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []interface{}:
		for _, e := range x {
			dropEmpty(e)
		}
	case nil:
		return true
	}
	return false
}

// differences lists where got and want differ, by path, at most max of them.
func differences(at string, got, want interface{}, max int) []string {
	var out []string
	var walk func(at string, got, want interface{})
	walk = func(at string, got, want interface{}) {
		if len(out) >= max {
			return
		}
		switch w := want.(type) {
		case map[string]interface{}:
			g, ok := got.(map[string]interface{})
			if !ok {
				out = append(out, fmt.Sprintf("%s: got %v, want an object", at, short(got)))
				return
			}
			keys := map[string]bool{}
			for k := range w {
				keys[k] = true
			}
			for k := range g {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				walk(at+"."+k, g[k], w[k])
			}
		case []interface{}:
			g, ok := got.([]interface{})
			if !ok || len(g) != len(w) {
				out = append(out, fmt.Sprintf("%s: got %v, want %v", at, short(got), short(want)))
				return
			}
			for i := range w {
				walk(fmt.Sprintf("%s[%d]", at, i), g[i], w[i])
			}
		default:
			if fmt.Sprint(got) != fmt.Sprint(want) {
				out = append(out, fmt.Sprintf("%s: got %v, want %v", at, short(got), short(want)))
			}
		}
	}
	walk(at, got, want)
	return out
}

func short(v interface{}) string {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
