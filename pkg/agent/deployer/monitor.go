package deployer

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/summary"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// observed is what the agent sees of a release's objects downstream.
type observed struct {
	nonReady  []fleet.NonReadyStatus
	modified  []fleet.ModifiedStatus
	resources []fleet.BundleDeploymentResource
	// pods are the Pods of the workloads in nonReady, by their index there.
	pods map[int]podsOf
}

// observe reads each object of a release from the downstream cluster: is it there,
// does it still hold what the release put in it, and is it ready.
func observe(infos []*resource.Info, diff *fleet.DiffOptions, ignoreConditions []map[string]string) (observed, error) {
	var out observed
	for _, info := range infos {
		want, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		want = want.DeepCopy()
		gvk := want.GroupVersionKind()
		apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
		if err := info.Get(); err != nil {
			if apierrors.IsNotFound(err) {
				out.modified = append(out.modified, fleet.ModifiedStatus{
					Kind: kind, APIVersion: apiVersion, Namespace: info.Namespace, Name: info.Name, Create: true,
				})
				continue
			}
			return out, fmt.Errorf("reading %s %s/%s: %w", kind, info.Namespace, info.Name, err)
		}
		live, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		out.resources = append(out.resources, fleet.BundleDeploymentResource{
			Kind: kind, APIVersion: apiVersion, Namespace: info.Namespace, Name: info.Name, CreatedAt: live.GetCreationTimestamp(),
		})
		ignore := ignoredPointers(diff, want)
		if path := firstDifference(want.Object, live.Object, "", ignore); path != "" {
			out.modified = append(out.modified, fleet.ModifiedStatus{
				Kind: kind, APIVersion: apiVersion, Namespace: info.Namespace, Name: info.Name,
				Patch: "differs at " + path,
			})
		}
		if s := summary.Summarize(withoutConditions(live, ignoreConditions)); !s.IsReady() {
			out.nonReady = append(out.nonReady, fleet.NonReadyStatus{
				UID: live.GetUID(), Kind: kind, APIVersion: apiVersion, Namespace: info.Namespace, Name: info.Name,
				Summary: fleet.ResourceSummary{State: s.State, Error: s.Error, Transitioning: s.Transitioning, Message: s.Message},
			})
			if of, ok := workloadPods(live); ok {
				if out.pods == nil {
					out.pods = map[int]podsOf{}
				}
				out.pods[len(out.nonReady)-1] = of
			}
		}
	}
	return out, nil
}

// ignoredPointers are the JSON pointers diff.comparePatches ignores for obj.
func ignoredPointers(diff *fleet.DiffOptions, obj *unstructured.Unstructured) map[string]bool {
	ignore := map[string]bool{}
	if diff == nil {
		return ignore
	}
	for _, p := range diff.ComparePatches {
		if (p.Kind != "" && p.Kind != obj.GetKind()) || (p.APIVersion != "" && p.APIVersion != obj.GetAPIVersion()) ||
			(p.Name != "" && p.Name != obj.GetName()) || (p.Namespace != "" && p.Namespace != obj.GetNamespace()) {
			continue
		}
		for _, ptr := range p.JSONPointers {
			ignore[ptr] = true
		}
		for _, op := range p.Operations {
			if op.Op == "remove" {
				ignore[op.Path] = true
			}
		}
	}
	return ignore
}

// metadataCompared are the metadata fields a release sets and a user may change.
var metadataCompared = map[string]bool{"labels": true, "annotations": true}

// firstDifference returns the JSON pointer of the first field of want that live does
// not hold, or "". Fields live has beyond want (defaults, status, what controllers
// add) are not differences.
func firstDifference(want, live interface{}, ptr string, ignore map[string]bool) string {
	if ignore[ptr] {
		return ""
	}
	switch w := want.(type) {
	case map[string]interface{}:
		l, ok := live.(map[string]interface{})
		if !ok {
			return orRoot(ptr)
		}
		for k, wv := range w {
			if ptr == "" && k == "status" {
				continue
			}
			if ptr == "/metadata" && !metadataCompared[k] {
				continue
			}
			lv, ok := l[k]
			child := ptr + "/" + escape(k)
			if !ok {
				if isEmpty(wv) || ignore[child] {
					continue
				}
				return child
			}
			if d := firstDifference(wv, lv, child, ignore); d != "" {
				return d
			}
		}
		return ""
	case []interface{}:
		l, ok := live.([]interface{})
		if !ok || len(l) != len(w) {
			return orRoot(ptr)
		}
		for i := range w {
			if d := firstDifference(w[i], l[i], ptr+"/"+strconv.Itoa(i), ignore); d != "" {
				return d
			}
		}
		return ""
	default:
		if sameScalar(want, live) {
			return ""
		}
		return orRoot(ptr)
	}
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func isEmpty(v interface{}) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]interface{}:
		return len(t) == 0
	case []interface{}:
		return len(t) == 0
	case string:
		return t == ""
	case bool:
		// false is usually omitted by the API server.
		return !t
	}
	if n, ok := number(v); ok {
		return n == 0
	}
	return false
}

// sameScalar compares JSON scalars, taking 1 and 1.0 as equal.
func sameScalar(a, b interface{}) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	af, aok := number(a)
	bf, bok := number(b)
	return aok && bok && af == bf
}

func number(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// withoutConditions is obj without the status conditions that ignore.conditions
// match (every key and value of one entry equal to the condition's fields, e.g.
// {type: Progressing, status: "False"}): they do not count for readiness.
func withoutConditions(obj *unstructured.Unstructured, ignore []map[string]string) *unstructured.Unstructured {
	if len(ignore) == 0 {
		return obj
	}
	conds, found, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil || !found {
		return obj
	}
	kept := make([]interface{}, 0, len(conds))
	for _, c := range conds {
		cond, ok := c.(map[string]interface{})
		if !ok || !ignored(cond, ignore) {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(conds) {
		return obj
	}
	out := obj.DeepCopy()
	_ = unstructured.SetNestedSlice(out.Object, kept, "status", "conditions")
	return out
}

func ignored(cond map[string]interface{}, ignore []map[string]string) bool {
	for _, match := range ignore {
		if len(match) == 0 {
			continue
		}
		all := true
		for k, v := range match {
			if fmt.Sprint(cond[k]) != v {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
