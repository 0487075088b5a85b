package helmclient

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// BoundReleases makes cfg read its releases from secrets (as Helm's Secret driver
// does) only after checking that they decode to at most limit bytes in all, per
// read: Helm decompresses a release with no limit, and the releases of a cluster the
// hub does not trust are written by whoever runs it.
func BoundReleases(cfg *action.Configuration, secrets typedcorev1.SecretInterface, limit int64) {
	d := driver.NewSecrets(&boundedSecrets{SecretInterface: secrets, limit: limit})
	d.Log = cfg.Log
	cfg.Releases = storage.Init(d)
}

type boundedSecrets struct {
	typedcorev1.SecretInterface
	limit int64
}

func (b *boundedSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := b.SecretInterface.Get(ctx, name, opts)
	if err != nil {
		return s, err
	}
	budget := b.limit
	return s, b.check(s, &budget)
}

func (b *boundedSecrets) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	list, err := b.SecretInterface.List(ctx, opts)
	if err != nil {
		return list, err
	}
	budget := b.limit
	for i := range list.Items {
		if err := b.check(&list.Items[i], &budget); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// check decodes s's release as Helm will, into nothing, taking its size off budget.
func (b *boundedSecrets) check(s *corev1.Secret, budget *int64) error {
	encoded := s.Data["release"]
	data := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(data, encoded)
	if err != nil {
		return nil // Helm reports what is not a release
	}
	data = data[:n]
	var r io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b, 0x08}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil
		}
		r = zr
	}
	read, _ := io.Copy(io.Discard, io.LimitReader(r, *budget+1))
	if read > *budget {
		return fmt.Errorf("the Helm releases in Secret %s/%s and the others read with it decode to more than %d bytes: refusing to read them", s.Namespace, s.Name, b.limit)
	}
	*budget -= read
	return nil
}
