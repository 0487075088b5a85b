// Package images checks `make images`: OCI image tarballs for the hub and the agent,
// built without a container engine, named as the charts expect, that load and run.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

func TestMakeImagesBuildsLoadableImagesTheChartsName(t *testing.T) {
	t.Parallel()
	root := framework.RepoRoot(t)
	out := t.TempDir()
	make := exec.Command("make", "-C", root, "--no-print-directory", "image-tarballs", "IMAGES_DIR="+out, "BIN="+framework.BinDir(t))
	report, err := make.CombinedOutput()
	if err != nil {
		t.Fatalf("make image-tarballs: %v\n%s", err, report)
	}
	t.Logf("make images:\n%s", report)

	// Each chart rendered as it is installed, with only its required values.
	charts := map[string][]string{
		"hub":   {"flotilla", filepath.Join(root, "charts", "fleet-like", "hub"), "--set", "apiServerURL=https://hub:6443"},
		"agent": {"fleet-agent", filepath.Join(root, "charts", "fleet-like", "agent"), "--set", "token=abc,apiServerURL=https://hub:6443,clusterNamespace=clusters"},
	}
	for image, chart := range charts {
		t.Run(image, func(t *testing.T) {
			tarball := filepath.Join(out, image+".tar")
			want := chartImage(t, chart)
			img := readDockerArchive(t, tarball)
			if len(img.RepoTags) != 1 || img.RepoTags[0] != want {
				t.Errorf("%s is tagged %v; the %s chart runs %q by default", tarball, img.RepoTags, image, want)
			}
			entrypoint := "/" + image
			if got := strings.Join(img.config.Config.Entrypoint, " "); got != entrypoint {
				t.Errorf("entrypoint %q, want %q", got, entrypoint)
			}
			if img.config.Config.User != "65532:65532" {
				t.Errorf("user %q: the charts require a non-root user (runAsNonRoot)", img.config.Config.User)
			}
			if img.config.OS != "linux" || img.config.Architecture != "amd64" {
				t.Errorf("platform %s/%s", img.config.OS, img.config.Architecture)
			}
			for _, f := range []string{"etc/passwd", "etc/group", "tmp/", "etc/ssl/certs/ca-certificates.crt"} {
				if _, ok := img.files[f]; !ok {
					t.Errorf("the image has no %s", f)
				}
			}

			// The binary in the image is static and runs on its own.
			bin := filepath.Join(t.TempDir(), image)
			if err := os.WriteFile(bin, img.files[strings.TrimPrefix(entrypoint, "/")], 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatalf("%s in the image: %v", entrypoint, err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s in the image is dynamically linked", entrypoint)
				}
			}
			f.Close()
			if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
				t.Errorf("%s --version from the image: %v\n%s", entrypoint, err, out)
			}

			// A loader other than our own reads it: skopeo checks every digest while it
			// copies the archive into an OCI layout.
			if skopeo, err := exec.LookPath("skopeo"); err == nil {
				layout := filepath.Join(t.TempDir(), "oci")
				if out, err := exec.Command(skopeo, "copy", "--quiet", "docker-archive:"+tarball, "oci:"+layout+":"+image).CombinedOutput(); err != nil {
					t.Errorf("skopeo copy: %v\n%s", err, out)
				}
			} else {
				t.Log("skopeo is not installed (make tools installs it); checked the archive's digests only")
			}
		})
	}
}

// chartImage is the image a chart's Deployment runs with its default values; chart is
// the release name, the chart and the values it needs.
func chartImage(t *testing.T, chart []string) string {
	t.Helper()
	args := append([]string{"template"}, chart...)
	out, err := exec.Command("helm", append(args, "-n", "cattle-fleet-system", "--kube-version", "1.37.2")...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", chart, err, out)
	}
	m := regexp.MustCompile(`(?m)^\s+image: "?([^"\s]+)"?$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no image in the %s chart's manifests:\n%s", chart, out)
	}
	return m[1]
}

type archive struct {
	RepoTags []string
	config   struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			Entrypoint []string
			User       string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	// files holds every regular file and directory ("dir/") of the image's layers.
	files map[string][]byte
}

// readDockerArchive reads a `docker save` tarball as `docker load` does, checking that
// each layer's uncompressed digest is the one the image config lists.
func readDockerArchive(t *testing.T, path string) archive {
	t.Helper()
	entries := map[string][]byte{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = data
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json: %v (%d images)", path, err, len(manifest))
	}
	var img archive
	img.RepoTags = manifest[0].RepoTags
	if err := json.Unmarshal(entries[manifest[0].Config], &img.config); err != nil {
		t.Fatalf("%s: config %s: %v", path, manifest[0].Config, err)
	}
	if len(img.config.RootFS.DiffIDs) != len(manifest[0].Layers) {
		t.Fatalf("%s: %d layers, %d diff_ids", path, len(manifest[0].Layers), len(img.config.RootFS.DiffIDs))
	}
	img.files = map[string][]byte{}
	for i, layer := range manifest[0].Layers {
		zr, err := gzip.NewReader(bytes.NewReader(entries[layer]))
		if err != nil {
			t.Fatalf("layer %s: %v", layer, err)
		}
		uncompressed, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %s: %v", layer, err)
		}
		sum := sha256.Sum256(uncompressed)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != img.config.RootFS.DiffIDs[i] {
			t.Errorf("layer %s has digest %s; the config says %s", layer, got, img.config.RootFS.DiffIDs[i])
		}
		lr := tar.NewReader(bytes.NewReader(uncompressed))
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", layer, err)
			}
			data, _ := io.ReadAll(lr)
			img.files[h.Name] = data
		}
	}
	return img
}
