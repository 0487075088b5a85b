package deployer

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla/flotilla/pkg/names"
)

// made is what the agent knows of a release it made for a BundleDeployment: what
// removing it takes. It is kept in the agent's own namespace (see ledger), never read
// from the release: Helm keeps a release's records (manifest, labels) in Secrets of
// the release's namespace, where a Bundle's serviceAccount may write, and removal
// runs with rights the Bundle's author may not have.
type made struct {
	Namespace        string `json:"namespace"`
	Release          string `json:"release"`
	BundleDeployment string `json:"bundleDeployment"`
	// ServiceAccount the release was deployed as, and is removed as ("": the agent).
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// KeepResources: removing it forgets the release and keeps its objects.
	KeepResources bool `json:"keepResources,omitempty"`
	// DeleteNamespace: removing it deletes its namespace, if CreatedNamespace.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// CreatedNamespace: the agent created the namespace for this release.
	CreatedNamespace bool `json:"createdNamespace,omitempty"`
	// Hub is the hub whose BundleDeployment the release was made for ("": the
	// current one, for releases recorded before hubs were).
	Hub string `json:"hub,omitempty"`
}

func (m made) key() string { return m.Namespace + "." + m.Release }

// ledger is the list of releases the agent made, in the ConfigMap
// names.AgentReleasesConfigMap of its namespace, read once and written through.
type ledger struct {
	kube      kubernetes.Interface
	namespace string
	// legacy lists the releases agents made before they kept a ledger, for the first
	// start of one that does (see load).
	legacy func() ([]made, error)

	mu      sync.Mutex
	cm      *corev1.ConfigMap
	entries map[string]made
}

// load reads the ledger, or, the first time, makes it from the releases agents
// labelled before there was one: all were deployed as the agent (Bundles could not
// name a serviceAccount then), and none of their namespaces is known to be the
// agent's doing.
func (l *ledger) load(ctx context.Context) error {
	if l.entries != nil {
		return nil
	}
	cm, err := l.kube.CoreV1().ConfigMaps(l.namespace).Get(ctx, names.AgentReleasesConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var old []made
		if old, err = l.legacy(); err != nil {
			return fmt.Errorf("listing the releases made before the agent kept %s/%s: %w", l.namespace, names.AgentReleasesConfigMap, err)
		}
		entries := map[string]made{}
		for _, m := range old {
			entries[m.key()] = m
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.AgentReleasesConfigMap, Namespace: l.namespace}}
		if cm.Data, err = encodeLedger(entries); err != nil {
			return err
		}
		if cm, err = l.kube.CoreV1().ConfigMaps(l.namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s/%s: %w", l.namespace, names.AgentReleasesConfigMap, err)
		}
	} else if err != nil {
		return fmt.Errorf("reading %s/%s: %w", l.namespace, names.AgentReleasesConfigMap, err)
	}
	entries := map[string]made{}
	for k, v := range cm.Data {
		var m made
		if err := json.Unmarshal([]byte(v), &m); err != nil || m.key() != k {
			// Not the agent's writing: the entry is not trusted, and stays out.
			continue
		}
		entries[k] = m
	}
	l.cm, l.entries = cm, entries
	return nil
}

func encodeLedger(entries map[string]made) (map[string]string, error) {
	data := make(map[string]string, len(entries))
	for k, m := range entries {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		data[k] = string(raw)
	}
	return data, nil
}

// update applies change to the entries and writes them, if anything changed.
func (l *ledger) update(change func(entries map[string]made) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.load(ctx); err != nil {
		return err
	}
	next := make(map[string]made, len(l.entries))
	for k, v := range l.entries {
		next[k] = v
	}
	if !change(next) {
		return nil
	}
	data, err := encodeLedger(next)
	if err != nil {
		return err
	}
	cm := l.cm.DeepCopy()
	cm.Data = data
	written, err := l.kube.CoreV1().ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Someone else wrote it: the agent's entries are what holds; read it again for
		// its resource version (or to make it again) and write them.
		l.entries = nil
		if err = l.load(ctx); err == nil {
			cm = l.cm.DeepCopy()
			cm.Data = data
			written, err = l.kube.CoreV1().ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s/%s: %w", l.namespace, names.AgentReleasesConfigMap, err)
	}
	l.cm, l.entries = written, next
	return nil
}

// record notes m, keeping that the agent created the namespace if it ever did.
func (l *ledger) record(m made) error {
	return l.update(func(entries map[string]made) bool {
		old, ok := entries[m.key()]
		m.CreatedNamespace = m.CreatedNamespace || (ok && old.CreatedNamespace && old.BundleDeployment == m.BundleDeployment)
		if ok && old == m {
			return false
		}
		entries[m.key()] = m
		return true
	})
}

// forget removes m.
func (l *ledger) forget(m made) error {
	return l.update(func(entries map[string]made) bool {
		if _, ok := entries[m.key()]; !ok {
			return false
		}
		delete(entries, m.key())
		return true
	})
}

// find lists the entries that match, in a stable order.
func (l *ledger) find(match func(made) bool) ([]made, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.load(ctx); err != nil {
		return nil, err
	}
	var out []made
	for _, m := range l.entries {
		if match(m) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out, nil
}
