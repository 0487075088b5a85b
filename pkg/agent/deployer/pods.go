package deployer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// podsOf are the Pods a workload that is not ready runs: its namespace and selector.
type podsOf struct {
	namespace string
	selector  labels.Selector
}

// workloadKinds are the kinds whose readiness is that of the Pods they select.
var workloadKinds = map[string]bool{
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true, "batch/Job": true,
}

// workloadPods says which Pods obj runs, if it is a workload.
func workloadPods(obj *unstructured.Unstructured) (podsOf, bool) {
	gvk := obj.GroupVersionKind()
	if !workloadKinds[gvk.Group+"/"+gvk.Kind] {
		return podsOf{}, false
	}
	raw, found, err := unstructured.NestedMap(obj.Object, "spec", "selector")
	if err != nil || !found {
		return podsOf{}, false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return podsOf{}, false
	}
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || selector.Empty() {
		return podsOf{}, false
	}
	return podsOf{namespace: obj.GetNamespace(), selector: selector}, true
}

// podStartingReasons are waiting reasons of a container on its way to running.
var podStartingReasons = map[string]bool{"ContainerCreating": true, "PodInitializing": true, "": true}

// podProblem is why the first of pods (by name) that has one cannot run or become
// ready, in words the kubelet and scheduler gave: an image that cannot be pulled, a
// crashing container, a Pod that fits no node. "" when none has a problem to tell.
func podProblem(pods []corev1.Pod) string {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, pod := range sorted {
		if pod.DeletionTimestamp != nil {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
				return problem(pod.Name, c.Reason, c.Message)
			}
		}
		statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, s := range statuses {
			if w := s.State.Waiting; w != nil && !podStartingReasons[w.Reason] {
				return problem(pod.Name, w.Reason, w.Message)
			}
			if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
				return problem(pod.Name, t.Reason, fmt.Sprintf("container %s exited with %d %s", s.Name, t.ExitCode, t.Message))
			}
		}
	}
	return ""
}

// maxProblemLength bounds what a Pod's message adds to a status.
const maxProblemLength = 300

func problem(pod, reason, message string) string {
	text := strings.TrimSpace(fmt.Sprintf("Pod %s: %s: %s", pod, reason, strings.TrimSpace(message)))
	text = strings.TrimSuffix(text, ":")
	if len(text) > maxProblemLength {
		text = text[:maxProblemLength] + "..."
	}
	return text
}

// maxPodsLooked bounds the Pods read for one workload's problem.
const maxPodsLooked = 20

// explainNotReady adds to each workload that is not ready the problem of its Pods.
func (d *Deployer) explainNotReady(o *observed) {
	if d.DownstreamKube == nil {
		return
	}
	for i, of := range o.pods {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		list, err := d.DownstreamKube.CoreV1().Pods(of.namespace).List(ctx, metav1.ListOptions{LabelSelector: of.selector.String(), Limit: maxPodsLooked})
		cancel()
		if err != nil {
			continue
		}
		if p := podProblem(list.Items); p != "" {
			o.nonReady[i].Summary.Message = []string{p}
		}
	}
}
