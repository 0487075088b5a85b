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
func (e Encoded) Gzip() ([]byte, error) { return gzipped(e.raw) }

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Base64Gzip encodes data as a Bundle resource of encoding "base64+gz" holds it.
func Base64Gzip(data []byte) (string, error) {
	gz, err := gzipped(data)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(gz), nil
}

// DefaultMaxSize is the default limit on a Bundle's decoded resources (and on a
// Content's uncompressed JSON): far above any real chart, far below what would hurt
// a hub or an agent.
const DefaultMaxSize int64 = 64 << 20

// TooLargeError is content that decodes to more than the limit allows.
type TooLargeError struct {
	What  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s decodes to more than %d bytes, the limit (the hub's --max-bundle-size)", e.What, e.Limit)
}

// copyLimited copies r to w, or fails with a TooLargeError (naming what) once more
// than *budget bytes came out of it; it takes what it copied off the budget, so one
// budget bounds several copies.
func copyLimited(w io.Writer, r io.Reader, budget *int64, what string, limit int64) error {
	n, err := io.Copy(w, io.LimitReader(r, *budget+1))
	if err != nil {
		return err
	}
	if n > *budget {
		return &TooLargeError{What: what, Limit: limit}
	}
	*budget -= n
	return nil
}

// Resources reads the resources of a Content back, checking its checksum; the
// uncompressed JSON may be at most limit bytes.
func Resources(c *fleet.Content, limit int64) ([]fleet.BundleResource, error) {
	zr, err := gzip.NewReader(bytes.NewReader(c.Content))
	if err != nil {
		return nil, fmt.Errorf("content %s: not gzip data: %w", c.Name, err)
	}
	budget := limit
	var buf bytes.Buffer
	if err := copyLimited(&buf, zr, &budget, "content "+c.Name, limit); err != nil {
		return nil, fmt.Errorf("content %s: %w", c.Name, err)
	}
	raw := buf.Bytes()
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

// Files decodes resources into file contents keyed by their cleaned path. Together
// they may decode to at most limit bytes: each is decoded once, as a stream, and
// decoding stops as soon as the limit is passed (a TooLargeError).
func Files(resources []fleet.BundleResource, limit int64) (map[string][]byte, error) {
	files := make(map[string][]byte, len(resources))
	budget := limit
	for i, r := range resources {
		name := fileName(i, r)
		data, err := decode(r, &budget, limit)
		if err != nil {
			return nil, fmt.Errorf("resource %q: %w", r.Name, err)
		}
		files[name] = data
	}
	return files, nil
}

// Size is how many bytes resources decode to, checked as Files checks them but
// without keeping what they decode to: what the hub needs to accept a Bundle.
func Size(resources []fleet.BundleResource, limit int64) (int64, error) {
	budget := limit
	for _, r := range resources {
		if err := decodeTo(io.Discard, r, &budget, limit); err != nil {
			return 0, fmt.Errorf("resource %q: %w", r.Name, err)
		}
	}
	return limit - budget, nil
}

func fileName(i int, r fleet.BundleResource) string {
	name := strings.TrimPrefix(path.Clean("/"+r.Name), "/")
	if r.Name == "" || name == "" {
		name = fmt.Sprintf("resource%03d.yaml", i)
	}
	return name
}

func decode(r fleet.BundleResource, budget *int64, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if err := decodeTo(&buf, r, budget, limit); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeTo writes r's decoded content to w, taking it off budget.
func decodeTo(w io.Writer, r fleet.BundleResource, budget *int64, limit int64) error {
	var src io.Reader
	switch r.Encoding {
	case "":
		src = strings.NewReader(r.Content)
	case "base64":
		src = base64.NewDecoder(base64.StdEncoding, strings.NewReader(r.Content))
	case "base64+gz":
		zr, err := gzip.NewReader(base64.NewDecoder(base64.StdEncoding, strings.NewReader(r.Content)))
		if err != nil {
			return err
		}
		src = zr
	default:
		return fmt.Errorf("unknown encoding %q (want \"\", base64 or base64+gz)", r.Encoding)
	}
	return copyLimited(w, src, budget, "the Bundle's resources", limit)
}
