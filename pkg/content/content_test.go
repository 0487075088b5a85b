package content

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
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
	back, err := Resources(c)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(back)
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
	if _, err := Resources(c); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("tampered content: %v", err)
	}
	if _, err := Files([]fleet.BundleResource{{Name: "x", Content: "x", Encoding: "rot13"}}); err == nil || !strings.Contains(err.Error(), "rot13") {
		t.Errorf("unknown encoding: %v", err)
	}
}
