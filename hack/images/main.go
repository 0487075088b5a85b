// Command images writes OCI image tarballs for Flotilla's static binaries without a
// container engine: each image is a small base layer (passwd and group entries for a
// non-root user, CA certificates, /tmp and a home directory) plus one layer holding the
// binary, which is also the entrypoint. The tarballs load with `docker load`,
// `podman load`, `kind load image-archive` and `skopeo copy docker-archive:...`.
//
//	go run . --out ../../bin/images --repository flotilla --tag 0.1.0 ../../bin/hub ../../bin/agent
//
// It lives in its own Go module so that go-containerregistry's dependencies never move
// the versions the hub and agent are built with.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the images run as: distroless's "nonroot", which the charts' securityContext
// also names.
const (
	uid  = 65532
	home = "/home/nonroot"
)

func main() {
	var (
		out        = flag.String("out", "bin/images", "directory the <binary>.tar files are written to")
		repository = flag.String("repository", "flotilla", "image repository prefix; an image is named <repository>/<binary>:<tag>")
		tag        = flag.String("tag", "", "image tag (required; the Makefile passes the charts' appVersion)")
		caFile     = flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the images; empty leaves it out")
	)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: images --tag TAG [flags] BINARY...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *tag == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, *repository, *tag, *caFile, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, repository, tag, caFile string, binaries []string) error {
	base, err := baseLayer(caFile)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, binary := range binaries {
		ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", repository, filepath.Base(binary), tag))
		if err != nil {
			return err
		}
		img, err := image(base, binary, tag)
		if err != nil {
			return fmt.Errorf("%s: %w", binary, err)
		}
		file := filepath.Join(out, filepath.Base(binary)+".tar")
		if err := tarball.WriteToFile(file, ref, img); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		info, err := os.Stat(file)
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%s\t%.1f MiB\n", file, ref.String(), digest, float64(info.Size())/(1<<20))
	}
	return nil
}

// image is base plus the binary at /<name>, run as the non-root user.
func image(base v1.Layer, binary, tag string) (v1.Image, error) {
	if err := requireStatic(binary); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	entrypoint := "/" + filepath.Base(binary)
	bin, err := layer([]entry{{name: entrypoint, mode: 0o755, data: data}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, bin)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = "amd64"
	cfg.OS = "linux"
	cfg.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: home,
		Env: []string{
			"PATH=/",
			"HOME=" + home,
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":   filepath.Base(binary),
			"org.opencontainers.image.version": tag,
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// requireStatic refuses a dynamically linked binary: on a base with no libc it would
// fail at start with a confusing "no such file or directory".
func requireStatic(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("is dynamically linked; build it with CGO_ENABLED=0 (the Makefile does)")
		}
	}
	return nil
}

func baseLayer(caFile string) (v1.Layer, error) {
	entries := []entry{
		{name: "/etc/", mode: 0o755, dir: true},
		{name: "/etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", uid, uid, home))},
		{name: "/etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid))},
		{name: "/tmp/", mode: 0o1777, dir: true},
		{name: "/home/", mode: 0o755, dir: true},
		{name: home + "/", mode: 0o700, owner: uid, dir: true},
	}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA certificates (--ca-certificates; install Debian's ca-certificates or pass an empty value): %w", err)
		}
		entries = append(entries,
			entry{name: "/etc/ssl/", mode: 0o755, dir: true},
			entry{name: "/etc/ssl/certs/", mode: 0o755, dir: true},
			entry{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: data})
	}
	return layer(entries)
}

type entry struct {
	name  string
	mode  int64
	owner int
	dir   bool
	data  []byte
}

// layer is a gzip layer of entries with fixed timestamps, so that the same binary
// always gives the same image digest.
func layer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, e := range entries {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.name, "/"),
			Mode:    e.mode,
			Uid:     e.owner,
			Gid:     e.owner,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
