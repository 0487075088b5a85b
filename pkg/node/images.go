package node

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// imageTarball is one docker-archive tarball and the image names it holds.
type imageTarball struct {
	file string
	tags []string
}

// maxManifestSize bounds the manifest.json read from a tarball.
const maxManifestSize = 1 << 20

// imageTarballs expands the files and directories given into the tarballs to load,
// each with the names its manifest gives.
func imageTarballs(sources []string) ([]imageTarball, error) {
	var files []string
	for _, source := range sources {
		info, err := os.Stat(source)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		if !info.IsDir() {
			files = append(files, source)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(source, "*.tar"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	var images []imageTarball
	for _, file := range files {
		tags, err := archiveTags(file)
		if err != nil {
			return nil, fmt.Errorf("image tarball %s: %w", file, err)
		}
		images = append(images, imageTarball{file: file, tags: tags})
	}
	return images, nil
}

// archiveTags reads the image names from a docker-archive's manifest.json.
func archiveTags(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		header, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no manifest.json: not a docker-archive (make images writes them)")
		}
		if err != nil {
			return nil, err
		}
		if header.Name != "manifest.json" {
			continue
		}
		if header.Size > maxManifestSize {
			return nil, fmt.Errorf("manifest.json is %d bytes, more than %d", header.Size, maxManifestSize)
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(io.LimitReader(tr, maxManifestSize)).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("manifest.json: %w", err)
		}
		var tags []string
		for _, entry := range manifest {
			tags = append(tags, entry.RepoTags...)
		}
		if len(tags) == 0 {
			return nil, errors.New("manifest.json names no image")
		}
		return tags, nil
	}
}

// sandboxImage picks the pause image among the tarballs' images.
func sandboxImage(images []imageTarball) (string, error) {
	for _, image := range images {
		for _, tag := range image.tags {
			repository := tag
			if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
				repository = tag[:i]
			}
			if repository == "pause" || strings.HasSuffix(repository, "/pause") {
				return tag, nil
			}
		}
	}
	return "", errors.New("no pause image among --images (make images builds flotilla/pause); name one with --sandbox-image")
}

// importImage loads a tarball into containerd's namespace for Kubernetes, where the
// kubelet finds it. Pods must not pull it: no registry serves it.
func importImage(ctx context.Context, p paths, file string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", p.socketPath(), "--namespace", containerdNamespace,
		"images", "import", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("loading %s into containerd: %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// LoadImages loads image tarballs, or directories of them, into the containerd of the
// node running with dataDir, for Pods to run without pulling.
func LoadImages(ctx context.Context, dataDir string, sources []string) error {
	if dataDir == "" {
		return errors.New("--data-dir is required")
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	p := paths{dataDir: dataDir}
	if _, err := os.Stat(p.socketPath()); err != nil {
		return fmt.Errorf("no node runs with data directory %s (no containerd socket %s)", dataDir, p.socketPath())
	}
	images, err := imageTarballs(sources)
	if err != nil {
		return err
	}
	for _, image := range images {
		if err := importImage(ctx, p, image.file); err != nil {
			return err
		}
		fmt.Printf("loaded %s from %s\n", strings.Join(image.tags, ", "), image.file)
	}
	return nil
}
