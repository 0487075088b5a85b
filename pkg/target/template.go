package target

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// clusterLabelPrefix: a Helm value "global.fleet.clusterLabels.<label>" becomes the
// value of that label of the cluster (empty when it has none), as in Fleet.
const clusterLabelPrefix = "global.fleet.clusterLabels."

// maxTemplateOutput bounds what templating one Bundle's values for one cluster may
// produce; maxRepeat bounds the counts given to functions that repeat.
const (
	maxTemplateOutput = 1 << 20
	maxRepeat         = 10000
	maxValuesDepth    = 50
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
		rendered, err := renderValues(values, context)
		if err != nil {
			return options, err
		}
		values = rendered
		for _, key := range sortedKeys(h.TemplateValues) {
			var v interface{}
			text, err := execute("helm.templateValues."+key, h.TemplateValues[key], context)
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
func renderValues(values map[string]interface{}, context map[string]interface{}) (map[string]interface{}, error) {
	if !hasTemplate(values) {
		return values, nil
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	text, err := execute("helm.values", string(data), context)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("helm.values: templated, they are no longer YAML: %w", err)
	}
	return out, nil
}

// errTooLong: a template wrote more than maxTemplateOutput bytes.
var errTooLong = fmt.Errorf("the template writes more than %d bytes", maxTemplateOutput)

type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxTemplateOutput {
		return 0, errTooLong
	}
	return b.Buffer.Write(p)
}

func execute(name, text string, context map[string]interface{}) (string, error) {
	tmpl, err := template.New(name).Funcs(templateFuncs()).Option("missingkey=error").Delims("${", "}").Parse(text)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var out limitedBuffer
	if err := tmpl.Execute(&out, context); err != nil {
		if errors.Is(err, errTooLong) {
			return "", fmt.Errorf("%s: %w", name, errTooLong)
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), nil
}

// unsafeFuncs are sprig functions templates may not call: those that read the hub's
// environment or network, those whose result changes from one call to the next
// (values would differ at every look, and the cluster be redeployed each time), and
// those that cost far more than their input (key generation, password hashing).
var unsafeFuncs = []string{
	"env", "expandenv", "getHostByName", "include", "tpl",
	"now", "date", "dateInZone", "date_in_zone", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "ago", "unixEpoch", "htmlDate", "htmlDateInZone",
	"randAlpha", "randAlphaNum", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"derivePassword", "bcrypt", "htpasswd", "encryptAES", "decryptAES",
}

// templateFuncs are sprig's functions less unsafeFuncs, with the counts of those
// that repeat or count bounded.
func templateFuncs() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range unsafeFuncs {
		delete(f, name)
	}
	bounded := func(n int) error {
		if n > maxRepeat {
			return fmt.Errorf("count %d is more than %d", n, maxRepeat)
		}
		return nil
	}
	repeat := f["repeat"].(func(int, string) string)
	f["repeat"] = func(n int, s string) (string, error) {
		if err := bounded(n); err != nil {
			return "", err
		}
		return repeat(n, s), nil
	}
	indent := f["indent"].(func(int, string) string)
	f["indent"] = func(n int, s string) (string, error) {
		if err := bounded(n); err != nil {
			return "", err
		}
		return indent(n, s), nil
	}
	nindent := f["nindent"].(func(int, string) string)
	f["nindent"] = func(n int, s string) (string, error) {
		if err := bounded(n); err != nil {
			return "", err
		}
		return nindent(n, s), nil
	}
	until := f["until"].(func(int) []int)
	f["until"] = func(n int) ([]int, error) {
		if err := bounded(n); err != nil {
			return nil, err
		}
		return until(n), nil
	}
	untilStep := f["untilStep"].(func(int, int, int) []int)
	f["untilStep"] = func(start, stop, step int) ([]int, error) {
		if step == 0 || (stop-start)/step > maxRepeat || (stop-start)/step < -maxRepeat {
			return nil, fmt.Errorf("untilStep %d %d %d: more than %d steps", start, stop, step, maxRepeat)
		}
		return untilStep(start, stop, step), nil
	}
	delete(f, "seq")
	return f
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
