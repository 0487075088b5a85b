package bundlereader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
)

// folder writes files (path: content) under a new folder and returns it.
func folder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func resourceNames(b *fleet.Bundle) []string {
	var out []string
	for _, r := range b.Spec.Resources {
		out = append(out, r.Name)
	}
	return out
}

func TestReadTakesTheFilesFleetTakes(t *testing.T) {
	dir := folder(t, map[string]string{
		"fleet.yaml":          "namespace: app\n",
		"deploy.yaml":         "kind: ConfigMap\n",
		"README.md":           "# app\n",
		".hidden.yaml":        "kind: Secret\n",
		".git/config":         "[core]\n",
		"sub/.fleetignore":    "*.bak\nskipped/*\n",
		"sub/keep.yaml":       "kind: Service\n",
		"sub/old.bak":         "old\n",
		"sub/skipped/x.yaml":  "kind: Pod\n",
		"other/skipped/y.yml": "kind: Pod\n",
		"empty.yaml":          "",
	})
	b, err := Read(context.Background(), "app", dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(resourceNames(b), " ")
	want := "README.md deploy.yaml empty.yaml fleet.yaml other/skipped/y.yml sub/keep.yaml"
	if got != want {
		t.Errorf("resources %q, want %q", got, want)
	}
	if b.Spec.TargetNamespace != "app" || len(b.Spec.Targets) != 1 || b.Spec.Targets[0].ClusterGroup != "default" {
		t.Errorf("spec %+v: want namespace app and the default target", b.Spec)
	}
}

func TestReadRefusesWhatLeavesTheFolder(t *testing.T) {
	outside := folder(t, map[string]string{"secret.yaml": "password: hunter2\n"})
	cases := []struct {
		name  string
		setup func(dir string)
		files map[string]string
		want  string
	}{
		{
			name: "a link to a file outside",
			setup: func(dir string) {
				must(t, os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(dir, "x.yaml")))
			},
			want: "outside the folder",
		},
		{
			name: "a relative link climbing out",
			setup: func(dir string) {
				must(t, os.Symlink("../../../../../../../../etc/passwd", filepath.Join(dir, "x.yaml")))
			},
			want: "outside the folder",
		},
		{
			name:  "a link to a folder",
			setup: func(dir string) { must(t, os.Symlink(outside, filepath.Join(dir, "linked"))) },
			want:  "outside the folder",
		},
		{
			name:  "a named pipe, which would block a reader",
			setup: func(dir string) { must(t, syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644)) },
			want:  "is not a file",
		},
		{
			name: "a link to a hidden file (a checkout's token in .git/config)",
			setup: func(dir string) {
				must(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("extraheader = AUTHORIZATION: basic c2VjcmV0\n"), 0o644))
				must(t, os.Symlink(".git/config", filepath.Join(dir, "leak.txt")))
			},
			want: "hidden or named in a .fleetignore",
		},
		{
			name:  "a link to an ignored file",
			files: map[string]string{"fleet.yaml": "{}\n", ".fleetignore": "secrets/*\n*.key\n", "secrets/db.yaml": "password: x\n", "tls.key": "KEY"},
			setup: func(dir string) {
				must(t, os.Symlink("secrets/db.yaml", filepath.Join(dir, "a.yaml")))
				must(t, os.Symlink("tls.key", filepath.Join(dir, "b.txt")))
			},
			want: "hidden or named in a .fleetignore",
		},
		{
			name:  "a .fleetignore that is a link to a device",
			setup: func(dir string) { must(t, os.Symlink("/dev/zero", filepath.Join(dir, ".fleetignore"))) },
			want:  "is not a file",
		},
		{
			name:  "values files outside",
			files: map[string]string{"fleet.yaml": "helm:\n  valuesFiles: [../secret.yaml]\n"},
			want:  "is not a file of the folder",
		},
		{
			name:  "an absolute values file",
			files: map[string]string{"fleet.yaml": "helm:\n  valuesFiles: [/etc/passwd]\n"},
			want:  "is not a file of the folder",
		},
		{
			name:  "a chart folder outside",
			files: map[string]string{"fleet.yaml": "helm:\n  chart: ../chart\n"},
			want:  "leaves the folder",
		},
		{
			name:  "a chart that is a local path, not a URL",
			files: map[string]string{"fleet.yaml": "helm:\n  chart: /etc\n"},
			want:  "leaves the folder",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = map[string]string{"fleet.yaml": "{}\n"}
			}
			dir := folder(t, files)
			if tc.setup != nil {
				tc.setup(dir)
			}
			_, err := Read(context.Background(), "x", dir, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFollowsLinksInsideTheFolder(t *testing.T) {
	dir := folder(t, map[string]string{"base/cm.yaml": "kind: ConfigMap\n"})
	must(t, os.Symlink("base/cm.yaml", filepath.Join(dir, "cm.yaml")))
	b, err := Read(context.Background(), "x", dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(resourceNames(b), " "); got != "base/cm.yaml cm.yaml" {
		t.Errorf("resources %q", got)
	}
}

func TestReadIsBounded(t *testing.T) {
	dir := folder(t, map[string]string{"big.yaml": strings.Repeat("x", 4096)})
	_, err := Read(context.Background(), "x", dir, Options{MaxSize: 1024})
	var tooLarge *content.TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("error %v, want a TooLargeError", err)
	}
}

func TestFleetYAMLWithAnUnknownFieldIsRefused(t *testing.T) {
	dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  chart: x\n  releasName: typo\n"})
	_, err := Read(context.Background(), "x", dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "releasName") {
		t.Fatalf("error %v, want one naming releasName", err)
	}
}

func TestFleetYAMLCannotNameAnotherBundlesContentOrValues(t *testing.T) {
	for _, field := range []string{"valuesHash: 0123abcd", "contentsId: s-0123abcd", "resources: [{name: x.yaml, content: 'kind: Secret'}]"} {
		dir := folder(t, map[string]string{"fleet.yaml": "name: payments\n" + field + "\n"})
		_, err := Read(context.Background(), "x", dir, Options{})
		if err == nil || !strings.Contains(err.Error(), "may not set resources, contentsId or valuesHash") {
			t.Errorf("%s: error %v, want it refused", field, err)
		}
	}
}

func TestFleetYAMLOptionsBecomeTheBundles(t *testing.T) {
	dir := folder(t, map[string]string{
		"fleet.yaml": `name: custom
labels: {team: a}
defaultNamespace: apps
helm:
  releaseName: web
  values: {replicas: 1, image: {tag: v1}}
  valuesFiles: [values-prod.yaml]
targetCustomizations:
- clusterSelector: {matchLabels: {env: prod}}
  helm: {values: {replicas: 3}}
- name: dev
  clusterSelector: {matchLabels: {env: dev}}
`,
		"values-prod.yaml": "image: {tag: v2}\n",
		"cm.yaml":          "kind: ConfigMap\n",
	})
	b, err := Read(context.Background(), "folder-name", dir, Options{Labels: map[string]string{"source": "cli"}, TargetNamespace: "forced"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "custom" || b.Labels["team"] != "a" || b.Labels["source"] != "cli" {
		t.Errorf("metadata %+v", b.ObjectMeta)
	}
	values, _ := yaml.Marshal(b.Spec.Helm.Values.Data)
	if string(values) != "image:\n  tag: v2\nreplicas: 1\n" {
		t.Errorf("values %s: the values file should win over values", values)
	}
	if len(b.Spec.Targets) != 2 || b.Spec.Targets[0].Name != "target000" || b.Spec.Targets[1].Name != "dev" {
		t.Errorf("targets %+v", b.Spec.Targets)
	}
	if b.Spec.TargetNamespace != "forced" || b.Spec.Targets[0].TargetNamespace != "forced" {
		t.Errorf("--target-namespace not applied to the Bundle and its targets")
	}
}

func TestOverrideTargetsReplaceTheCallers(t *testing.T) {
	dir := folder(t, map[string]string{
		"fleet.yaml": "overrideTargets:\n- clusterName: only-this\n",
		"cm.yaml":    "kind: ConfigMap\n",
	})
	b, err := Read(context.Background(), "x", dir, Options{Targets: []fleet.BundleTarget{{ClusterGroup: "all"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Spec.Targets) != 1 || b.Spec.Targets[0].ClusterName != "only-this" || len(b.Spec.TargetRestrictions) != 1 {
		t.Errorf("targets %+v, restrictions %+v", b.Spec.Targets, b.Spec.TargetRestrictions)
	}
}

func TestFindsTheFoldersFleetFinds(t *testing.T) {
	dir := folder(t, map[string]string{
		"a/fleet.yaml":         "{}\n",
		"a/b/fleet.yaml":       "{}\n",
		"a/b/c/cm.yaml":        "kind: ConfigMap\n",
		".hidden/fleet.yaml":   "{}\n",
		"charts/x/fleet.yaml":  "{}\n",
		"charts/README.md":     "",
		"loose/deploy.yaml":    "kind: Deployment\n",
		"withyaml/fleet.yml":   "{}\n",
		"withyaml/nested.yaml": "kind: Pod\n",
	})
	t.Chdir(dir)
	found, err := Find("repo", ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Path+"="+f.Name)
	}
	want := "a=repo-a a/b=repo-a-b charts/x=repo-charts-x withyaml=repo-withyaml"
	// The root has loose manifests (loose/deploy.yaml, not under a fleet.yaml).
	want = ".=repo " + want
	if strings.Join(got, " ") != want {
		t.Errorf("found %q, want %q", strings.Join(got, " "), want)
	}
}

// chartArchive packs entries (name: content; a "->" content makes a link) as a chart.
func chartArchive(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, data := range entries {
		hd := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if target, ok := strings.CutPrefix(data, "->"); ok {
			hd = &tar.Header{Name: name, Linkname: target, Typeflag: tar.TypeSymlink}
		}
		must(t, tw.WriteHeader(hd))
		if hd.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(data))
			must(t, err)
		}
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return buf.Bytes()
}

func TestChartArchivesCannotEscapeOrExplode(t *testing.T) {
	bomb := func() []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		const size = 200 << 20
		must(t, tw.WriteHeader(&tar.Header{Name: "c/templates/big.yaml", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}))
		zeros := make([]byte, 1<<20)
		for i := 0; i < size/len(zeros); i++ {
			_, err := tw.Write(zeros)
			must(t, err)
		}
		must(t, tw.Close())
		must(t, zw.Close())
		return buf.Bytes()
	}()
	cases := map[string]struct {
		archive []byte
		want    string
	}{
		"a path climbing out": {chartArchive(t, map[string]string{"c/Chart.yaml": "name: c\n", "../../x.yaml": "x"}), "leaves the chart archive"},
		"an absolute path":    {chartArchive(t, map[string]string{"/etc/cron.d/x": "x"}), "relative paths only"},
		"a link":              {chartArchive(t, map[string]string{"c/Chart.yaml": "name: c\n", "c/values.yaml": "->/etc/passwd"}), "link"},
		"a gzip bomb":         {bomb, "decodes to more than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(tc.archive) }))
			defer srv.Close()
			dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  chart: " + srv.URL + "/c.tgz\n"})
			_, err := Read(context.Background(), "x", dir, Options{MaxSize: 8 << 20})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestCredentialsGoOnlyWhereAllowed(t *testing.T) {
	archive := chartArchive(t, map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n"})
	var sawAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		sawAuth = append(sawAuth, r.URL.Path+":"+user+":"+pass)
		if !ok || user != "u" || pass != "p" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write(archive)
	}))
	defer srv.Close()
	dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  chart: " + srv.URL + "/private/c.tgz\n"})

	allowed, err := AllowCredentials(regexp.QuoteMeta(srv.URL + "/private/"))
	must(t, err)
	b, err := Read(context.Background(), "x", dir, Options{Auth: Auth{Username: "u", Password: "p", SendCredentialsTo: allowed}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(resourceNames(b), " "), "/c/Chart.yaml") {
		t.Errorf("resources %v: want the downloaded chart", resourceNames(b))
	}

	elsewhere, err := AllowCredentials(regexp.QuoteMeta("https://charts.example.com/"))
	must(t, err)
	sawAuth = nil
	_, err = Read(context.Background(), "x", dir, Options{Auth: Auth{Username: "u", Password: "p", SendCredentialsTo: elsewhere}})
	if err == nil || !strings.Contains(err.Error(), "credentials were not sent") {
		t.Fatalf("error %v, want the download refused, saying why", err)
	}
	if len(sawAuth) != 1 || sawAuth[0] != "/private/c.tgz::" {
		t.Errorf("the server saw %q: credentials must not be sent to a URL the pattern does not allow", sawAuth)
	}
}

func TestPickTag(t *testing.T) {
	tags := []string{"1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "104.1.0_up57.0.3", "latest"}
	cases := []struct{ version, want, err string }{
		{"", "104.1.0_up57.0.3", ""},
		{"1.2.0", "1.2.0", ""},
		{"^1.0", "1.10.0", ""},
		{"~1.2", "1.2.0", ""},
		{"104.1.0+up57.0.3", "104.1.0_up57.0.3", ""},
		{"latest", "latest", ""},
		{">=200", "", "no tag matches"},
		{"not a version", "", "neither a tag"},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			got, err := pickTag(tags, tc.version)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("pickTag(%q) = %q, %v; want an error saying %q", tc.version, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("pickTag(%q) = %q, %v; want %q", tc.version, got, err, tc.want)
			}
		})
	}
}

// FuzzParseFleetYAML: any fleet.yaml parses or is refused with an error; never a panic.
func FuzzParseFleetYAML(f *testing.F) {
	f.Add([]byte("namespace: x\nhelm:\n  values: {a: 1}\ntargetCustomizations:\n- name: dev\n"))
	f.Add([]byte("{"))
	f.Add([]byte("helm: [1, 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseFleetYAML(data)
	})
}

func TestChartRepositoriesOverTLS(t *testing.T) {
	archive := chartArchive(t, map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n"})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  chart: " + srv.URL + "/c.tgz\n"})
	cases := []struct {
		name string
		auth Auth
		err  string
	}{
		{"a certificate no root signs", Auth{}, "certificate"},
		{"the CA bundle", Auth{CABundle: ca}, ""},
		{"insecure, when asked", Auth{InsecureSkipVerify: true}, ""},
		{"a CA bundle without a certificate", Auth{CABundle: []byte("not PEM")}, "holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(context.Background(), "x", dir, Options{Auth: tc.auth})
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestCredentialsForMatchesWholeOrigins(t *testing.T) {
	allowed, err := AllowCredentials(`https://charts\.example\.com`)
	must(t, err)
	a := Auth{Username: "u", Password: "p", SendCredentialsTo: allowed}
	for rawURL, want := range map[string]bool{
		"https://charts.example.com/index.yaml":              true,
		"https://charts.example.com":                         true,
		"https://charts.example.com?x=1":                     true,
		"https://charts.example.com.attacker.net/index.yaml": false,
		"https://charts.example.com@attacker.net/index.yaml": false,
		"https://charts.example.com:8443/index.yaml":         false,
		"http://charts.example.com/index.yaml":               false,
		"https://attacker.net/?u=https://charts.example.com": false,
		"https://u:p@charts.example.com/index.yaml":          false,
	} {
		if got := a.credentialsFor(rawURL); got != want {
			t.Errorf("credentialsFor(%s) = %v, want %v", rawURL, got, want)
		}
	}
}

func TestCredentialsAreDroppedOnRedirectsElsewhere(t *testing.T) {
	archive := chartArchive(t, map[string]string{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 1.0.0\n"})
	var sawAuth atomic.Value
	sawAuth.Store("")
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth.Store(r.Header.Get("Authorization"))
		_, _ = w.Write(archive)
	}))
	defer elsewhere.Close()
	// Same host (127.0.0.1), another port: Go itself would keep the credentials.
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/c.tgz", http.StatusFound)
	}))
	defer home.Close()
	allowed, err := AllowCredentials(regexp.QuoteMeta(home.URL + "/"))
	must(t, err)
	dir := folder(t, map[string]string{"fleet.yaml": "helm:\n  chart: " + home.URL + "/c.tgz\n"})
	if _, err := Read(context.Background(), "x", dir, Options{Auth: Auth{Username: "u", Password: "p", SendCredentialsTo: allowed}}); err != nil {
		t.Fatal(err)
	}
	if got := sawAuth.Load().(string); got != "" {
		t.Errorf("the server redirected to got Authorization %q", got)
	}
}

// An options file (a GitRepo's bundles[].options) is read instead of fleet.yaml,
// is not one of the Bundle's files, and may not be outside its folder.
func TestReadWithAnOptionsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("fleet.yaml", "defaultNamespace: from-fleet-yaml\n")
	write("fleet-prod.yaml", "defaultNamespace: prod\n")
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	b, err := Read(context.Background(), "app", dir, Options{FleetFile: "fleet-prod.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.DefaultNamespace != "prod" {
		t.Errorf("defaultNamespace %q, want the options file's", b.Spec.DefaultNamespace)
	}
	for _, r := range b.Spec.Resources {
		if r.Name == "fleet-prod.yaml" {
			t.Error("the options file is one of the Bundle's files")
		}
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("defaultNamespace: stolen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../secret.yaml", "/etc/hostname", "elsewhere/secret.yaml", "missing.yaml"} {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(context.Background(), "app", dir, Options{FleetFile: name}); err == nil {
				t.Errorf("options file %q was read", name)
			}
		})
	}
}

// The service account a GitRepo (or its GitRepoRestriction) sets is every target's:
// a fleet.yaml's targetCustomizations cannot deploy as another one.
func TestTheServiceAccountOptionIsEveryTargets(t *testing.T) {
	dir := t.TempDir()
	fy := "serviceAccount: mine\ntargetCustomizations:\n- name: dev\n  clusterSelector: {matchLabels: {env: dev}}\n  serviceAccount: other-teams-deployer\n"
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(fy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Read(context.Background(), "app", dir, Options{ServiceAccount: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ServiceAccount != "deployer" {
		t.Errorf("the Bundle's service account: %q", b.Spec.ServiceAccount)
	}
	for _, target := range b.Spec.Targets {
		if target.ServiceAccount != "deployer" {
			t.Errorf("target %s deploys as %q", target.Name, target.ServiceAccount)
		}
	}
}
