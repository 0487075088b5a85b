package bundlereader

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/registry"
)

// ociRegistry starts an in-process OCI registry that wants user u, password p, and
// returns its host.
func ociRegistry(t *testing.T, refused *atomic.Int32) string {
	t.Helper()
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "u" || pass != "p" {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestChartsComeFromOCIRegistriesWithCredentials(t *testing.T) {
	var refused atomic.Int32
	host := ociRegistry(t, &refused)
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth("u", "p"),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	must(t, err)
	for _, version := range []string{"0.1.0", "0.2.0+build.1", "1.0.0"} {
		archive := chartArchive(t, map[string]string{
			"guestbook/Chart.yaml":        "apiVersion: v2\nname: guestbook\nversion: " + version + "\n",
			"guestbook/templates/cm.yaml": "kind: ConfigMap\n",
			"guestbook/.helmignore":       "*.bak\n",
		})
		if _, err := client.Push(archive, host+"/charts/guestbook:"+strings.ReplaceAll(version, "+", "_"), registry.PushOptStrictMode(false)); err != nil {
			t.Fatal(err)
		}
	}
	allowed, err := AllowCredentials(regexp.QuoteMeta("oci://" + host + "/charts/"))
	must(t, err)
	auth := Auth{Username: "u", Password: "p", PlainHTTP: true, SendCredentialsTo: allowed}

	cases := []struct{ version, want string }{
		{"~0.2", "0.2.0+build.1"},
		{"0.1.0", "0.1.0"},
		{"", "1.0.0"},
	}
	for _, tc := range cases {
		t.Run("version "+tc.version, func(t *testing.T) {
			dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  repo: oci://" + host + "/charts/guestbook\n  version: \"" + tc.version + "\"\n"})
			b, err := Read(context.Background(), "x", dir, Options{Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			folder := ChartFolder(b.Spec.Helm)
			var chart string
			for _, r := range b.Spec.Resources {
				if r.Name == folder+"/guestbook/Chart.yaml" {
					chart = r.Content
				}
				if strings.HasSuffix(r.Name, ".helmignore") {
					t.Errorf("hidden file %s kept", r.Name)
				}
			}
			if !strings.Contains(chart, "version: "+tc.want+"\n") {
				t.Errorf("Chart.yaml under %s is %q, want version %s", folder, chart, tc.want)
			}
		})
	}

	t.Run("without credentials for it", func(t *testing.T) {
		elsewhere, err := AllowCredentials("oci://registry.example.com/")
		must(t, err)
		before := refused.Load()
		dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  repo: oci://" + host + "/charts/guestbook\n"})
		_, err = Read(context.Background(), "x", dir, Options{Auth: Auth{Username: "u", Password: "p", PlainHTTP: true, SendCredentialsTo: elsewhere}})
		if err == nil {
			t.Fatal("downloaded without credentials")
		}
		if refused.Load() == before {
			t.Error("the registry saw no request")
		}
	})
}
