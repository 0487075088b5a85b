package content

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestEncodeAndReadBack(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("zipped: true\n"))
	_ = zw.Close()
	resources := []fleet.BundleResource{
		{Name: "plain.yaml", Content: "a: 1\n"},
		{Name: "dir/../b64.yaml", Content: base64.StdEncoding.EncodeToString([]byte("b: 2\n")), Encoding: "base64"},
		{Name: "/gz.yaml", Content: base64.StdEncoding.EncodeToString(gz.Bytes()), Encoding: "base64+gz"},
	}
	enc, err := Encode(resources)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Encode(resources)
	if enc.Name != again.Name || !strings.HasPrefix(enc.Name, "s-") || len(enc.SHA256) != 64 {
		t.Fatalf("names %s %s", enc.Name, again.Name)
	}
	data, err := enc.Gzip()
	if err != nil {
		t.Fatal(err)
	}
	c := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: enc.Name}, Content: data, SHA256Sum: enc.SHA256}
	back, err := Resources(c, DefaultMaxSize)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(back, DefaultMaxSize)
	if err != nil {
		t.Fatal(err)
	}
	if string(files["plain.yaml"]) != "a: 1\n" || string(files["b64.yaml"]) != "b: 2\n" || string(files["gz.yaml"]) != "zipped: true\n" {
		t.Errorf("files %q", files)
	}

	// A Content whose data does not match its name is refused.
	other, _ := Encode([]fleet.BundleResource{{Name: "x.yaml", Content: "x"}})
	if c.Content, err = other.Gzip(); err != nil {
		t.Fatal(err)
	}
	if _, err := Resources(c, DefaultMaxSize); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("tampered content: %v", err)
	}
	if _, err := Files([]fleet.BundleResource{{Name: "x", Content: "x", Encoding: "rot13"}}, DefaultMaxSize); err == nil || !strings.Contains(err.Error(), "rot13") {
		t.Errorf("unknown encoding: %v", err)
	}
}

// bomb is a base64+gz resource of n zero bytes: a few kilobytes per megabyte.
func bomb(t testing.TB, n int64) fleet.BundleResource {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := io.CopyN(zw, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	return fleet.BundleResource{Name: "bomb.yaml", Encoding: "base64+gz", Content: base64.StdEncoding.EncodeToString(gz.Bytes())}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestDecodingStopsAtTheLimit(t *testing.T) {
	const limit = 1 << 20
	for _, tc := range []struct {
		name      string
		resources []fleet.BundleResource
		tooLarge  bool
	}{
		{"a gzip bomb", []fleet.BundleResource{bomb(t, 64<<20)}, true},
		{"just over the limit", []fleet.BundleResource{bomb(t, limit+1)}, true},
		{"at the limit", []fleet.BundleResource{bomb(t, limit)}, false},
		{"several under, together over", []fleet.BundleResource{bomb(t, limit/2), {Name: "b", Content: strings.Repeat("b", limit/2)}, {Name: "c", Content: "c"}}, true},
		{"base64 over", []fleet.BundleResource{{Name: "b64", Encoding: "base64", Content: base64.StdEncoding.EncodeToString(make([]byte, limit+1))}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sizeErr := Size(tc.resources, limit)
			_, filesErr := Files(tc.resources, limit)
			for _, err := range []error{sizeErr, filesErr} {
				var tooLarge *TooLargeError
				if tc.tooLarge != errors.As(err, &tooLarge) || (!tc.tooLarge && err != nil) {
					t.Fatalf("got %v, want too large=%v", err, tc.tooLarge)
				}
			}
		})
	}
	// A Content whose JSON is over the limit is refused by the agent as well.
	enc, _ := Encode([]fleet.BundleResource{{Name: "big", Content: strings.Repeat("x", limit)}})
	data, _ := enc.Gzip()
	c := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: enc.Name}, Content: data, SHA256Sum: enc.SHA256}
	var tooLarge *TooLargeError
	if _, err := Resources(c, limit); !errors.As(err, &tooLarge) {
		t.Fatalf("Resources of a Content over the limit: %v", err)
	}
	if _, err := Resources(c, 2*limit); err != nil {
		t.Fatal(err)
	}
}

// FuzzFiles: any resources decode without panicking, within the limit, to the same
// total as Size counts.
func FuzzFiles(f *testing.F) {
	f.Add("x.yaml", "a: 1", "")
	f.Add("x.yaml", base64.StdEncoding.EncodeToString([]byte("a: 1")), "base64")
	f.Add("../../etc/passwd", bomb(f, 4096).Content, "base64+gz")
	f.Fuzz(func(t *testing.T, name, content, encoding string) {
		const limit = 1 << 16
		resources := []fleet.BundleResource{{Name: name, Content: content, Encoding: encoding}}
		files, err := Files(resources, limit)
		size, sizeErr := Size(resources, limit)
		if (err == nil) != (sizeErr == nil) {
			t.Fatalf("Files: %v, Size: %v", err, sizeErr)
		}
		if err != nil {
			return
		}
		var total int64
		for p, data := range files {
			if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == ".." {
				t.Fatalf("file name %q leaves the chart", p)
			}
			total += int64(len(data))
		}
		if total != size || total > limit {
			t.Fatalf("decoded %d bytes, Size says %d, limit %d", total, size, limit)
		}
	})
}
