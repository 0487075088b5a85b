package agent

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Nodes watches the downstream cluster's Nodes for the heartbeat.
type Nodes struct {
	informer cache.SharedIndexInformer
	changed  chan struct{}
}

// WatchNodes starts an informer on the downstream Nodes until ctx ends.
func WatchNodes(ctx context.Context, client kubernetes.Interface) *Nodes {
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	n := &Nodes{informer: factory.Core().V1().Nodes().Informer(), changed: make(chan struct{}, 1)}
	notify := func() {
		select {
		case n.changed <- struct{}{}:
		default:
		}
	}
	_, _ = n.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { notify() },
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*corev1.Node)
			c, ok2 := cur.(*corev1.Node)
			// Kubelets update their Node every few seconds; only readiness matters here.
			if !ok1 || !ok2 || ready(o) != ready(c) {
				notify()
			}
		},
		DeleteFunc: func(interface{}) { notify() },
	})
	factory.Start(ctx.Done())
	return n
}

// Changed signals when a node is added, removed, or changes readiness.
func (n *Nodes) Changed() <-chan struct{} { return n.changed }

// Count returns the ready and not ready node counts and one node's name, a ready one
// if there is any (the first by name, so it does not flap).
func (n *Nodes) Count() (readyCount, notReady int, sample string) {
	var readyNames, otherNames []string
	for _, obj := range n.informer.GetStore().List() {
		node, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		if ready(node) {
			readyNames = append(readyNames, node.Name)
		} else {
			otherNames = append(otherNames, node.Name)
		}
	}
	sort.Strings(readyNames)
	sort.Strings(otherNames)
	if len(readyNames) > 0 {
		sample = readyNames[0]
	} else if len(otherNames) > 0 {
		sample = otherNames[0]
	}
	return len(readyNames), len(otherNames), sample
}

func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
