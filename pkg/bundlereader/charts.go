package bundlereader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	orascontent "oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
)

// Auth is how charts are downloaded: the credentials of a helmSecretName (or of
// `hub apply`'s flags) and the TLS settings.
type Auth struct {
	Username string
	Password string
	// CABundle is added to the system's roots when checking a repository's certificate.
	CABundle []byte
	// InsecureSkipVerify accepts any certificate. Only when asked for.
	InsecureSkipVerify bool
	// PlainHTTP talks to OCI registries over HTTP instead of HTTPS.
	PlainHTTP bool
	// SendCredentialsTo limits where the credentials go: only to repositories whose
	// URL it matches from the start. A fleet.yaml comes from whoever can push to its
	// repository, and could name any server; nil sends credentials nowhere.
	SendCredentialsTo *regexp.Regexp
}

func (a Auth) hasCredentials() bool { return a.Username != "" || a.Password != "" }

// credentialsFor says whether the credentials may be sent to rawURL: the pattern
// must match it from its start through the whole of its scheme, host and port, so
// that "https://charts\.example\.com" allows neither
// https://charts.example.com.attacker.net nor https://charts.example.com@attacker.net
// (a URL with a user part gets no credentials at all).
func (a Auth) credentialsFor(rawURL string) bool {
	if !a.hasCredentials() || a.SendCredentialsTo == nil {
		return false
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.User != nil || u.Host == "" {
		return false
	}
	origin := u.Scheme + "://" + u.Host
	if !strings.HasPrefix(rawURL, origin) {
		return false
	}
	m := a.SendCredentialsTo.FindStringIndex(rawURL)
	if m == nil || m[0] != 0 || m[1] < len(origin) {
		return false
	}
	// The match must not end inside the host or port (a shorter pattern ending with
	// the host matched a longer host); what follows the origin starts a path.
	return m[1] > len(origin) || len(rawURL) == len(origin) || strings.ContainsRune("/?#", rune(rawURL[len(origin)]))
}

// AllowCredentials compiles pattern so that it matches URLs from their start only,
// preferring the longest match: a trusted URL in a query string does not let
// credentials go elsewhere.
func AllowCredentials(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	re, err := regexp.Compile("^(?:" + pattern + ")")
	if err != nil {
		return nil, err
	}
	re.Longest()
	return re, nil
}

// maxIndexSize bounds a repository's index.yaml.
const maxIndexSize = 64 << 20

// maxManifestSize bounds an OCI manifest.
const maxManifestSize = 4 << 20

// downloadTimeout bounds one chart's download.
const downloadTimeout = 5 * time.Minute

// chartMediaType is the layer of an OCI artifact that holds a Helm chart.
const chartMediaType = registry.ChartLayerMediaType

// ChartFolder is where a Bundle keeps the files of a chart downloaded for helm:
// ".chart/<sha256 of chart:repo:version>", as Fleet names it, so that an agent finds
// the chart of the options it is given.
func ChartFolder(h *fleet.HelmOptions) string {
	sum := sha256.Sum256([]byte(h.Chart + ":" + h.Repo + ":" + h.Version))
	return fmt.Sprintf(".chart/%x", sum)
}

// isRemote says whether h names a chart to download rather than a folder among files.
func isRemote(h *fleet.HelmOptions, files map[string][]byte) (bool, error) {
	if h == nil || (h.Chart == "" && h.Repo == "") {
		return false, nil
	}
	if h.Repo != "" || strings.Contains(h.Chart, "://") {
		return true, nil
	}
	dir := path.Clean(h.Chart)
	if path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return false, fmt.Errorf("helm.chart %q leaves the folder: name a folder inside it, or a URL", h.Chart)
	}
	if _, ok := files[path.Join(dir, "Chart.yaml")]; ok || dir == "." {
		return false, nil
	}
	return false, fmt.Errorf("helm.chart %q: no Chart.yaml in that folder, and it is not a URL (http://, https:// or oci://) nor a chart of helm.repo", h.Chart)
}

// maxDownloads bounds the charts, dependencies and indexes one Bundle may download.
const maxDownloads = 100

// downloader fetches charts.
type downloader struct {
	auth  Auth
	limit int64
	// client makes every request; the caller may give one that refuses some
	// addresses.
	client *http.Client
	// indexes are the repository indexes read, by URL: each is read once per Bundle.
	indexes map[string]*repo.IndexFile
	// downloads counts what was fetched, up to maxDownloads.
	downloads int
}

func newDownloader(a Auth, base *http.Client, limit int64) (*downloader, error) {
	var transport *http.Transport
	if base != nil && base.Transport != nil {
		t, ok := base.Transport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("chart downloads need an *http.Transport")
		}
		transport = t.Clone()
	} else {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if transport.TLSClientConfig != nil {
		tlsConfig = transport.TLSClientConfig.Clone()
	}
	if len(a.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(a.CABundle) {
			return nil, fmt.Errorf("the CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	tlsConfig.InsecureSkipVerify = a.InsecureSkipVerify //nolint:gosec // only when the user asks
	transport.TLSClientConfig = tlsConfig
	return &downloader{auth: a, limit: limit, client: &http.Client{Transport: transport, Timeout: downloadTimeout, CheckRedirect: keepCredentialsHome}}, nil
}

// keepCredentialsHome follows at most 10 redirects, and drops the credentials on one
// that leaves the first request's scheme, host or port (Go drops them only when the
// host changes, and keeps them for its subdomains).
func keepCredentialsHome(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("more than 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		req.Header.Del("Authorization")
	}
	return nil
}

func (d *downloader) count() error {
	if d.downloads++; d.downloads > maxDownloads {
		return fmt.Errorf("more than %d downloads for one Bundle (charts, their dependencies and repository indexes)", maxDownloads)
	}
	return nil
}

// chart downloads the chart h names: its files keyed by their path in the archive,
// the chart's folder first ("guestbook/Chart.yaml").
func (d *downloader) chart(ctx context.Context, h *fleet.HelmOptions) (map[string][]byte, error) {
	var (
		archive []byte
		err     error
	)
	switch {
	case strings.HasPrefix(h.Repo, "oci://"):
		archive, err = d.oci(ctx, h.Repo, h.Version)
	case strings.HasPrefix(h.Chart, "oci://") && h.Repo == "":
		archive, err = d.oci(ctx, h.Chart, h.Version)
	case h.Repo != "":
		var chartURL string
		if chartURL, err = d.fromIndex(ctx, h); err == nil {
			archive, err = d.get(ctx, chartURL, d.limit)
		}
	default:
		archive, err = d.get(ctx, h.Chart, d.limit)
	}
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", describe(h), err)
	}
	files, err := content.Unpack(archive, d.limit)
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", describe(h), err)
	}
	return files, nil
}

func describe(h *fleet.HelmOptions) string {
	var parts []string
	for _, kv := range [][2]string{{"chart", h.Chart}, {"repo", h.Repo}, {"version", h.Version}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+redact(kv[1]))
		}
	}
	return "the chart (" + strings.Join(parts, ", ") + ")"
}

// redact drops a password written into a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// fromIndex finds h.Chart at h.Version (a version or a semver range; empty is the
// newest stable one) in the index of the repository h.Repo, and returns its URL.
func (d *downloader) fromIndex(ctx context.Context, h *fleet.HelmOptions) (string, error) {
	if h.Chart == "" {
		return "", fmt.Errorf("helm.repo is set but helm.chart does not name a chart of it")
	}
	indexURL, err := url.JoinPath(h.Repo, "index.yaml")
	if err != nil {
		return "", err
	}
	index, ok := d.indexes[indexURL]
	if !ok {
		data, err := d.get(ctx, indexURL, min(d.limit, maxIndexSize))
		if err != nil {
			return "", err
		}
		index = &repo.IndexFile{}
		if err := yaml.Unmarshal(data, index); err != nil {
			return "", fmt.Errorf("reading %s: %w", redact(indexURL), err)
		}
		index.SortEntries()
		if d.indexes == nil {
			d.indexes = map[string]*repo.IndexFile{}
		}
		d.indexes[indexURL] = index
	}
	cv, err := index.Get(h.Chart, h.Version)
	if err != nil {
		return "", fmt.Errorf("%s: %w", redact(indexURL), err)
	}
	if len(cv.URLs) == 0 {
		return "", fmt.Errorf("%s lists no URL for %s %s", redact(indexURL), cv.Name, cv.Version)
	}
	return repo.ResolveReferenceURL(h.Repo, cv.URLs[0])
}

// get fetches rawURL (http or https) with at most limit bytes of body.
func (d *downloader) get(ctx context.Context, rawURL string, limit int64) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: only http, https and oci URLs are downloaded", redact(rawURL))
	}
	if err := d.count(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	if d.auth.credentialsFor(rawURL) {
		req.SetBasicAuth(d.auth.Username, d.auth.Password)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized && d.auth.hasCredentials() && !d.auth.credentialsFor(rawURL) {
			hint = " (credentials were not sent: the URL does not match the pattern of repositories allowed to receive them)"
		}
		return nil, fmt.Errorf("GET %s: %s%s", redact(rawURL), resp.Status, hint)
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(rawURL), err)
	}
	if n > limit {
		return nil, &content.TooLargeError{What: redact(rawURL), Limit: limit}
	}
	return buf.Bytes(), nil
}

// oci pulls the chart at ref ("oci://host/path/chart") whose tag is version or the
// highest matching the semver range version.
func (d *downloader) oci(ctx context.Context, ref, version string) ([]byte, error) {
	name := strings.TrimPrefix(ref, "oci://")
	repository, err := remote.NewRepository(name)
	if err != nil {
		return nil, err
	}
	if err := d.count(); err != nil {
		return nil, err
	}
	repository.PlainHTTP = d.auth.PlainHTTP
	client := &auth.Client{Client: d.client, Cache: auth.NewCache()}
	if d.auth.credentialsFor(ref) {
		client.Credential = auth.StaticCredential(repository.Reference.Registry, auth.Credential{Username: d.auth.Username, Password: d.auth.Password})
	}
	repository.Client = client

	tag, err := d.ociTag(ctx, repository, version)
	if err != nil {
		return nil, err
	}
	desc, err := repository.Resolve(ctx, tag)
	if err != nil {
		return nil, fmt.Errorf("%s:%s: %w", ref, tag, err)
	}
	if desc.Size > maxManifestSize {
		return nil, &content.TooLargeError{What: "the manifest of " + ref, Limit: maxManifestSize}
	}
	raw, err := orascontent.FetchAll(ctx, repository, desc)
	if err != nil {
		return nil, err
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return nil, fmt.Errorf("%s:%s: reading its manifest: %w", ref, tag, err)
	}
	for _, layer := range manifest.Layers {
		if layer.MediaType != chartMediaType && layer.MediaType != registry.LegacyChartLayerMediaType {
			continue
		}
		if layer.Size > d.limit {
			return nil, &content.TooLargeError{What: "the chart " + ref, Limit: d.limit}
		}
		return orascontent.FetchAll(ctx, repository.Blobs(), layer)
	}
	return nil, fmt.Errorf("%s:%s is not a Helm chart (no layer of type %s)", ref, tag, chartMediaType)
}

// ociTag is the tag of version: itself when the registry has it, else the highest
// tag in the range it gives (Helm writes "+" as "_" in tags).
func (d *downloader) ociTag(ctx context.Context, repository *remote.Repository, version string) (string, error) {
	var tags []string
	err := repository.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		if len(tags) > 100000 {
			return fmt.Errorf("the repository lists more than 100000 tags")
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("listing the tags of %s: %w", repository.Reference, err)
	}
	return pickTag(tags, version)
}
