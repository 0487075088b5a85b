package hubctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/pkg/bundlereader"
)

// folder writes a folder named name below dir holding one manifest of about size bytes.
func folder(t *testing.T, dir, name string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  x: " + strings.Repeat("x", size) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name, "cm.yaml"), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadBundlesBoundsTheirTotal(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		folder(t, dir, name, 10_000)
	}
	for _, tc := range []struct {
		name      string
		total     int64
		perBundle int64
		dirs      []string
		bundles   []BundleDir
		tooLarge  string // the Bundle being read when the total passed, "" when it fits
	}{
		{name: "no total bound", dirs: []string{"a", "b", "c"}},
		{name: "three fit", total: 40_000, dirs: []string{"a", "b", "c"}},
		{name: "the third passes the total", total: 25_000, dirs: []string{"a", "b", "c"}, tooLarge: "x-c"},
		{name: "one folder named again and again", total: 25_000, bundles: []BundleDir{{Dir: "a"}, {Dir: "a"}, {Dir: "a"}}, tooLarge: "x-a"},
		{name: "a total below one Bundle", total: 5_000, dirs: []string{"a"}, tooLarge: "x-a"},
		{name: "the per-Bundle bound stays its own error", total: 1 << 20, perBundle: 5_000, dirs: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ApplyOptions{Name: "x", Dirs: tc.dirs, Bundles: tc.bundles, BaseDir: dir, Namespace: "ws", MaxTotalSize: tc.total,
				Read: bundlereader.Options{MaxSize: tc.perBundle}, Log: &strings.Builder{}}
			bundles, err := ReadBundles(context.Background(), opts)
			var total *TotalTooLargeError
			switch {
			case tc.tooLarge != "":
				if !errors.As(err, &total) || total.Bundle != tc.tooLarge || total.Limit != tc.total {
					t.Fatalf("ReadBundles = %d Bundles, %v; want the total passed by %s", len(bundles), err, tc.tooLarge)
				}
			case tc.perBundle > 0:
				if err == nil || errors.As(err, &total) {
					t.Fatalf("ReadBundles = %v, want the per-Bundle bound's error", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				var sum int64
				for _, b := range bundles {
					sum += size(b)
				}
				if len(bundles) != 3 || (tc.total > 0 && sum > tc.total) {
					t.Fatalf("%d Bundles of %d bytes, want 3 within %d", len(bundles), sum, tc.total)
				}
			}
		})
	}
}
