// Package content stores a Bundle's resources as a Content and reads them back: the
// hub encodes them once per distinct set of resources, and every agent that deploys
// the Bundle decodes the same object.
package content

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// manifest is what a Content holds, gzip-compressed: the resources as the Bundle
// gives them (still encoded), in Fleet's layout.
type manifest struct {
	Resources []fleet.BundleResource `json:"resources"`
}

// Encoded is a Bundle's resources ready to be stored.
type Encoded struct {
	// Name is the Content's name, derived from SHA256.
	Name string
	// SHA256 is the hex sha256 of the uncompressed JSON.
	SHA256 string
	// raw is the uncompressed JSON.
	raw []byte
}

// Encode prepares resources for a Content. The same resources always give the same
// name, so Bundles with identical resources share one Content. It does not compress:
// a hub reconciles a Bundle far more often than it creates its Content.
func Encode(resources []fleet.BundleResource) (Encoded, error) {
	if resources == nil {
		resources = []fleet.BundleResource{}
	}
	raw, err := json.Marshal(manifest{Resources: resources})
	if err != nil {
		return Encoded{}, err
	}
	sum := sha256.Sum256(raw)
	sha := hex.EncodeToString(sum[:])
	return Encoded{Name: names.Content(sha), SHA256: sha, raw: raw}, nil
}

// Gzip is the compressed JSON, the Content's content field.
func (e Encoded) Gzip() ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(e.raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Resources reads the resources of a Content back, checking its checksum.
func Resources(c *fleet.Content) ([]fleet.BundleResource, error) {
	zr, err := gzip.NewReader(bytes.NewReader(c.Content))
	if err != nil {
		return nil, fmt.Errorf("content %s: not gzip data: %w", c.Name, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != c.SHA256Sum || names.Content(got) != c.Name {
		return nil, fmt.Errorf("content %s: checksum %s does not match its name and sha256sum %s", c.Name, got, c.SHA256Sum)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	return m.Resources, nil
}

// Files decodes resources into file contents keyed by their cleaned path.
func Files(resources []fleet.BundleResource) (map[string][]byte, error) {
	files := make(map[string][]byte, len(resources))
	for i, r := range resources {
		name := strings.TrimPrefix(path.Clean("/"+r.Name), "/")
		if r.Name == "" || name == "" {
			name = fmt.Sprintf("resource%03d.yaml", i)
		}
		data, err := decode(r)
		if err != nil {
			return nil, fmt.Errorf("resource %q: %w", r.Name, err)
		}
		files[name] = data
	}
	return files, nil
}

func decode(r fleet.BundleResource) ([]byte, error) {
	switch r.Encoding {
	case "":
		return []byte(r.Content), nil
	case "base64":
		return base64.StdEncoding.DecodeString(r.Content)
	case "base64+gz":
		gz, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	default:
		return nil, fmt.Errorf("unknown encoding %q (want \"\", base64 or base64+gz)", r.Encoding)
	}
}
