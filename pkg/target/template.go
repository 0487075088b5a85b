package target

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"

	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// clusterLabelPrefix: a Helm value "global.fleet.clusterLabels.<label>" becomes the
// value of that label of the cluster (empty when it has none), as in Fleet.
const clusterLabelPrefix = "global.fleet.clusterLabels."

// maxTemplateOutput bounds what templating one Bundle's values for one cluster may
// produce, function results on the way included; maxTemplateWork what its functions
// may be given; maxRepeat bounds the counts given to functions that repeat or count.
const (
	maxTemplateOutput = 1 << 20
	maxTemplateWork   = 16 << 20
	maxRepeat         = 10000
	maxValuesDepth    = 50
	// maxCount bounds the numbers untilStep counts between (sprig's loop overflows
	// near the ends of int).
	maxCount = 1 << 40
)

// Template resolves, in options' Helm values, what depends on the cluster, as Fleet's
// hub does: values "global.fleet.clusterLabels.<label>", then (unless
// helm.disablePreProcess) the ${ } templates in values and in helm.templateValues,
// with .ClusterName, .ClusterNamespace, .ClusterLabels, .ClusterAnnotations and
// .ClusterValues (the Cluster's spec.templateValues) and the sprig functions that
// always give the same result for the same input. It returns new options.
func Template(options fleet.BundleDeploymentOptions, cluster *fleet.Cluster) (fleet.BundleDeploymentOptions, error) {
	h := options.Helm
	if h == nil || len(h.TemplateValues) == 0 && (h.Values == nil || !dependsOnCluster(h.Values.Data)) {
		return options, nil
	}
	out := *options.DeepCopy()
	h = out.Helm
	values := map[string]interface{}{}
	if h.Values != nil {
		values = h.Values.Data
	}
	if err := labelValues(values, cluster.Labels, 0); err != nil {
		return options, err
	}
	if !h.DisablePreProcess {
		context := templateContext(cluster)
		b := newBudget()
		rendered, err := renderValues(values, context, b)
		if err != nil {
			return options, err
		}
		values = rendered
		for _, key := range sortedKeys(h.TemplateValues) {
			var v interface{}
			text, err := execute("helm.templateValues."+key, h.TemplateValues[key], context, b)
			if err != nil {
				return options, err
			}
			if err := yaml.Unmarshal([]byte(text), &v); err != nil {
				return options, fmt.Errorf("helm.templateValues.%s: the template gave %q, which is not YAML: %w", key, text, err)
			}
			values[key] = v
		}
	}
	h.Values = &fleet.GenericMap{Data: values}
	return out, nil
}

func templateContext(cluster *fleet.Cluster) map[string]interface{} {
	clusterValues := map[string]interface{}{}
	if cluster.Spec.TemplateValues != nil && cluster.Spec.TemplateValues.Data != nil {
		clusterValues = cluster.Spec.TemplateValues.DeepCopy().Data
	}
	return map[string]interface{}{
		"ClusterName":        cluster.Name,
		"ClusterNamespace":   cluster.Namespace,
		"ClusterLabels":      toDict(cluster.Labels),
		"ClusterAnnotations": toDict(cluster.Annotations),
		"ClusterValues":      clusterValues,
	}
}

func toDict(m map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func labelValues(values map[string]interface{}, labels map[string]string, depth int) error {
	if depth > maxValuesDepth {
		return fmt.Errorf("helm.values are nested more than %d deep", maxValuesDepth)
	}
	for k, v := range values {
		switch x := v.(type) {
		case string:
			if label, ok := strings.CutPrefix(x, clusterLabelPrefix); ok {
				values[k] = labels[label]
			}
		case map[string]interface{}:
			if err := labelValues(x, labels, depth+1); err != nil {
				return err
			}
		case []interface{}:
			for _, e := range x {
				if m, ok := e.(map[string]interface{}); ok {
					if err := labelValues(m, labels, depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// hasTemplate says whether a key or a string in v holds "${".
func hasTemplate(v interface{}) bool { return anyString(v, isTemplate) }

// dependsOnCluster says whether values hold a template or a cluster label value:
// most hold neither, and are used as they are.
func dependsOnCluster(values map[string]interface{}) bool {
	return anyString(values, func(s string) bool { return isTemplate(s) || strings.HasPrefix(s, clusterLabelPrefix) })
}

func isTemplate(s string) bool { return strings.Contains(s, "${") }

// anyString says whether f holds for a key or a string in v.
func anyString(v interface{}, f func(string) bool) bool {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]interface{}:
		for k, e := range x {
			if f(k) || anyString(e, f) {
				return true
			}
		}
	case []interface{}:
		for _, e := range x {
			if anyString(e, f) {
				return true
			}
		}
	}
	return false
}

// renderValues executes values, as YAML, as one template.
func renderValues(values map[string]interface{}, context map[string]interface{}, b *budget) (map[string]interface{}, error) {
	if !hasTemplate(values) {
		return values, nil
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	text, err := execute("helm.values", string(data), context, b)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("helm.values: templated, they are no longer YAML: %w", err)
	}
	return out, nil
}

// budget is what templating may do for one cluster. left is what it may produce:
// every function's result, measured as printed, and what the templates write count
// against it, so that no chain of functions can grow values without bound. work is
// what it may look at: every argument a function is given is measured against it, so
// that no template can spin on its inputs.
type budget struct{ left, work int64 }

func newBudget() *budget { return &budget{left: maxTemplateOutput, work: maxTemplateWork} }

// errBudget: the templates of one cluster produced more than maxTemplateOutput bytes.
var errBudget = fmt.Errorf("the templates produce more than %d bytes", maxTemplateOutput)

// errWork: the templates of one cluster looked at more than maxTemplateWork bytes.
var errWork = fmt.Errorf("the templates do more than %d bytes of work", maxTemplateWork)

func (b *budget) charge(n int64) error {
	if b.left -= n; b.left < 0 {
		return errBudget
	}
	return nil
}

// spend counts n bytes of work.
func (b *budget) spend(n int64) error {
	if n < 0 {
		return errWork
	}
	if b.work -= n; b.work < 0 {
		return errWork
	}
	return nil
}

// fits says whether n more bytes may be produced, without counting them.
func (b *budget) fits(n int64) error {
	if n < 0 || n > b.left {
		return errBudget
	}
	return nil
}

// size measures v against what may still be produced.
func (b *budget) size(v interface{}) (int64, error) {
	return measureOr(reflect.ValueOf(v), b.left, errBudget)
}

// Write counts what a template writes.
func (b *budget) writer(w *bytes.Buffer) *budgetWriter { return &budgetWriter{b: b, w: w} }

type budgetWriter struct {
	b *budget
	w *bytes.Buffer
}

func (bw *budgetWriter) Write(p []byte) (int, error) {
	if err := bw.b.charge(int64(len(p))); err != nil {
		return 0, err
	}
	return bw.w.Write(p)
}

func execute(name, text string, context map[string]interface{}, b *budget) (string, error) {
	tmpl, err := template.New(name).Funcs(templateFuncs(b)).Option("missingkey=error").Delims("${", "}").Parse(text)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if err := checkTree(tmpl); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(b.writer(&out), context); err != nil {
		for _, known := range []error{errBudget, errWork, errTooDeep} {
			if errors.Is(err, known) {
				return "", fmt.Errorf("%s: %w", name, known)
			}
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), nil
}

// checkTree refuses what would let a template run without bound: loops (range) and
// templates calling templates (define, block, template). Values need neither.
func checkTree(tmpl *template.Template) error {
	if len(tmpl.Templates()) > 1 {
		return errors.New("define and block are not allowed in values")
	}
	if tmpl.Tree == nil {
		return nil
	}
	return checkNodes(tmpl.Tree.Root)
}

func checkNodes(node parse.Node) error {
	switch n := node.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		return errors.New("range is not allowed in values")
	case *parse.TemplateNode:
		return errors.New("template is not allowed in values")
	case *parse.IfNode:
		if err := checkNodes(n.List); err != nil {
			return err
		}
		return checkNodes(n.ElseList)
	case *parse.WithNode:
		if err := checkNodes(n.List); err != nil {
			return err
		}
		return checkNodes(n.ElseList)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
