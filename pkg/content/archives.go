package content

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
)

// maxArchiveDepth bounds charts packed inside charts packed inside charts.
const maxArchiveDepth = 8

// tarHeaderSize is what each archive entry costs besides its content: without it, an
// archive of millions of empty files would be free.
const tarHeaderSize = 512

// CheckArchives checks that the chart archives (.tgz) among files, and the archives
// inside those, expand within what limit leaves after the files themselves: Helm
// unpacks a chart's charts/*.tgz in memory with limits of its own, far above ours
// once a Bundle holds many of them. It reads each archive once, as a stream. An
// archive that is not gzip and tar is left for Helm to report.
func CheckArchives(files map[string][]byte, limit int64) error {
	budget := limit
	names := make([]string, 0, len(files))
	for name, data := range files {
		budget -= int64(len(data))
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path.Ext(name) != ".tgz" {
			continue
		}
		if err := expand(files[name], &budget, limit, 0); err != nil {
			return fmt.Errorf("chart archive %q: %w", name, err)
		}
	}
	return nil
}

func expand(data []byte, budget *int64, limit int64, depth int) error {
	if depth > maxArchiveDepth {
		return fmt.Errorf("archives nested more than %d deep", maxArchiveDepth)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil
		}
		if *budget -= tarHeaderSize; *budget < 0 {
			return &TooLargeError{What: "the Bundle's chart archive", Limit: limit}
		}
		if path.Ext(hd.Name) != ".tgz" {
			if err := copyLimited(io.Discard, tr, budget, "the Bundle's chart archive", limit); err != nil {
				return err
			}
			continue
		}
		var inner bytes.Buffer
		if err := copyLimited(&inner, tr, budget, "the Bundle's chart archive", limit); err != nil {
			return err
		}
		if err := expand(inner.Bytes(), budget, limit, depth+1); err != nil {
			return fmt.Errorf("%s: %w", hd.Name, err)
		}
	}
}
