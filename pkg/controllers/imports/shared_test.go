package imports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestSharedWith(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		set              bool
		want             bool
	}{
		{name: "no annotation"},
		{name: "empty", set: true},
		{name: "the workspace", annotation: "clusters", set: true, want: true},
		{name: "among others, spaced", annotation: "dev, clusters ,prod", set: true, want: true},
		{name: "everyone", annotation: "*", set: true, want: true},
		{name: "another workspace", annotation: "clusters-2", set: true},
		{name: "a prefix of it", annotation: "cluster", set: true},
		{name: "commas only", annotation: ",,", set: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig", Namespace: "shared"}}
			if tc.set {
				secret.Annotations = map[string]string{names.AllowedWorkspacesAnnotation: tc.annotation}
			}
			if got := SharedWith(secret, "clusters"); got != tc.want {
				t.Fatalf("SharedWith(%q) = %v, want %v", tc.annotation, got, tc.want)
			}
		})
	}
}
