package content

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// tgz packs entries (name, content) as a gzip-compressed tar.
func tgz(t testing.TB, entries ...[2][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: string(e[0]), Mode: 0o644, Size: int64(len(e[1]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e[1]); err != nil {
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

func entry(name string, data []byte) [2][]byte { return [2][]byte{[]byte(name), data} }

func TestCheckArchives(t *testing.T) {
	const limit = 1 << 20
	chart := tgz(t, entry("sub/Chart.yaml", []byte("apiVersion: v2\nname: sub\nversion: 0.1.0\n")), entry("sub/templates/cm.yaml", []byte("kind: ConfigMap\n")))
	zeros := bytes.Repeat([]byte{0}, limit)
	bomb := tgz(t, entry("sub/templates/zeros", zeros))
	var many [][2][]byte
	for i := 0; i < 3000; i++ {
		many = append(many, entry("sub/templates/empty", nil))
	}
	tests := []struct {
		name     string
		files    map[string][]byte
		tooLarge bool
	}{
		{"a subchart archive", map[string][]byte{"Chart.yaml": []byte("name: top"), "charts/sub.tgz": chart}, false},
		{"an archive expanding past the limit", map[string][]byte{"charts/sub.tgz": bomb}, true},
		{"archives each under the limit, together over it", map[string][]byte{
			"charts/a.tgz": tgz(t, entry("a/zeros", zeros[:limit/2])),
			"charts/b.tgz": tgz(t, entry("b/zeros", zeros[:limit/2])),
		}, true},
		{"a bomb inside an archive", map[string][]byte{"charts/sub.tgz": tgz(t, entry("sub/charts/inner.tgz", bomb))}, true},
		{"thousands of empty entries", map[string][]byte{"charts/sub.tgz": tgz(t, many...)}, true},
		{"not an archive: Helm says so", map[string][]byte{"charts/sub.tgz": []byte("not gzip")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckArchives(tt.files, limit)
			var tooLarge *TooLargeError
			if tt.tooLarge != errors.As(err, &tooLarge) || (!tt.tooLarge && err != nil) {
				t.Fatalf("CheckArchives = %v, want too large %v", err, tt.tooLarge)
			}
		})
	}
}

// Archives inside archives beyond any chart's need are refused, however small.
func TestCheckArchivesBoundsNesting(t *testing.T) {
	archive := tgz(t, entry("c/Chart.yaml", []byte("name: c")))
	for i := 0; i < maxArchiveDepth+1; i++ {
		archive = tgz(t, entry("c/charts/c.tgz", archive))
	}
	if err := CheckArchives(map[string][]byte{"charts/c.tgz": archive}, 1<<20); err == nil {
		t.Fatal("archives nested deeper than the bound were accepted")
	}
}

// A Bundle's archives come from its author: checking them never panics.
func FuzzCheckArchives(f *testing.F) {
	f.Add(tgz(f, entry("sub/Chart.yaml", []byte("name: sub"))))
	f.Add(tgz(f, entry("sub/charts/inner.tgz", tgz(f, entry("inner/x", bytes.Repeat([]byte{0}, 4096))))))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, archive []byte) {
		_ = CheckArchives(map[string][]byte{"charts/sub.tgz": archive}, 64<<10)
	})
}

// FuzzUnpack: whatever a chart repository serves, Unpack returns files inside the
// archive within the limit, or an error; it never panics.
func FuzzUnpack(f *testing.F) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "c/Chart.yaml", Mode: 0o644, Size: 8, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("name: c\n"))
	_ = tw.Close()
	_ = zw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{0x1f, 0x8b, 0x08})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 20
		files, err := Unpack(data, limit)
		if err != nil {
			return
		}
		var total int64
		for name, content := range files {
			if strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") {
				t.Fatalf("path %q leaves the archive", name)
			}
			total += int64(len(content))
		}
		if total > limit {
			t.Fatalf("%d bytes unpacked, limit %d", total, limit)
		}
	})
}

// TestArchiveHeadersCount: an archive of entries with megabyte-long names (extended
// headers) is refused for what it decompresses to, though its files are empty.
func TestArchiveHeadersCount(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("c/%d-%s", i, strings.Repeat("x", 200<<10))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	var tooLarge *TooLargeError
	if _, err := Unpack(buf.Bytes(), 1<<20); !errors.As(err, &tooLarge) {
		t.Errorf("Unpack: %v, want a TooLargeError", err)
	}
	if err := CheckArchives(map[string][]byte{"charts/c.tgz": buf.Bytes()}, 1<<20); !errors.As(err, &tooLarge) {
		t.Errorf("CheckArchives: %v, want a TooLargeError", err)
	}
}
