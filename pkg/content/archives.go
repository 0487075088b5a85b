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
	"strings"
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
	tr := tar.NewReader(&capped{r: zr, left: 2 * limit, limit: limit})
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			return err
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

// Unpack reads a chart archive (gzip and tar) into its files, keyed by their path
// inside the archive (the chart's folder included, as "guestbook/Chart.yaml"). The
// archive comes from outside: its files may expand to at most limit bytes, counting
// each entry's header; a path that is absolute or leaves the archive, and a link of
// any kind, are refused rather than followed.
func Unpack(data []byte, limit int64) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a gzip archive: %w", err)
	}
	tr := tar.NewReader(&capped{r: zr, left: 2 * limit, limit: limit})
	files := map[string][]byte{}
	budget := limit
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar archive: %w", err)
		}
		if budget -= tarHeaderSize; budget < 0 {
			return nil, &TooLargeError{What: "the chart archive", Limit: limit}
		}
		switch hd.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%q is a link or special file; only regular files are read from a chart archive", hd.Name)
		}
		name, err := archivePath(hd.Name)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := copyLimited(&buf, tr, &budget, "the chart archive", limit); err != nil {
			return nil, err
		}
		files[name] = buf.Bytes()
	}
	if len(files) == 0 {
		return nil, errors.New("the chart archive holds no files")
	}
	return files, nil
}

// archivePath is name cleaned, or an error when it is absolute, has a Windows drive
// or separator, or climbs out of the archive.
func archivePath(name string) (string, error) {
	if strings.ContainsAny(name, `\:`) || path.IsAbs(name) {
		return "", fmt.Errorf("%q: chart archives hold relative paths only", name)
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q leaves the chart archive", name)
	}
	return clean, nil
}

// capped reads at most left bytes of r, then fails with a TooLargeError: the bytes
// of an archive's headers (a long name or extended header can take a megabyte each)
// count too, not only its files'.
type capped struct {
	r           io.Reader
	left, limit int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, &TooLargeError{What: "the chart archive", Limit: c.limit}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
