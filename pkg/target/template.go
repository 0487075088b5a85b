package target

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// clusterLabelPrefix: a Helm value "global.fleet.clusterLabels.<label>" becomes the
// value of that label of the cluster (empty when it has none), as in Fleet.
const clusterLabelPrefix = "global.fleet.clusterLabels."

// maxTemplateOutput bounds what templating one Bundle's values for one cluster may
// produce, function results on the way included; maxRepeat bounds the counts given
// to functions that repeat or count.
const (
	maxTemplateOutput = 1 << 20
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
		b := &budget{left: maxTemplateOutput}
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

// budget is what templating may produce for one cluster: every function's result
// and what the templates write count against it, so that no chain of functions can
// grow values without bound.
type budget struct{ left int64 }

// errBudget: the templates of one cluster produced more than maxTemplateOutput bytes.
var errBudget = fmt.Errorf("the templates produce more than %d bytes", maxTemplateOutput)

func (b *budget) charge(n int64) error {
	if b.left -= n; b.left < 0 {
		return errBudget
	}
	return nil
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
		if errors.Is(err, errBudget) {
			return "", fmt.Errorf("%s: %w", name, errBudget)
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

// unsafeFuncs are sprig functions templates may not call: those that read the hub's
// environment or network, those whose result changes from one call to the next
// (values would differ at every look, and the cluster be redeployed each time), and
// those that cost far more than their input (key generation, password hashing).
var unsafeFuncs = []string{
	"env", "expandenv", "getHostByName", "include", "tpl", "seq",
	"now", "date", "dateInZone", "date_in_zone", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "ago", "unixEpoch", "htmlDate", "htmlDateInZone",
	"randAlpha", "randAlphaNum", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"derivePassword", "bcrypt", "htpasswd", "encryptAES", "decryptAES",
}

// wideFormat: a printf width or precision of five digits or more, or one taken from
// the arguments.
var wideFormat = regexp.MustCompile(`%[-+# 0]*(\d{5,}|\*)|\.(\d{5,}|\*)`)

// templateFuncs are sprig's functions less unsafeFuncs, and Go's print functions, each
// charging its result to b; those that can make far more than their input check
// first what they would make.
func templateFuncs(b *budget) template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range unsafeFuncs {
		delete(f, name)
	}
	checked := func(n int64) error {
		if n < 0 || n > b.left {
			return errBudget
		}
		return nil
	}
	count := func(n int) error {
		if n < 0 || n > maxRepeat {
			return fmt.Errorf("count %d is not between 0 and %d", n, maxRepeat)
		}
		return nil
	}
	repeat := f["repeat"].(func(int, string) string)
	f["repeat"] = func(n int, s string) (string, error) {
		if err := count(n); err != nil {
			return "", err
		}
		if err := checked(int64(n) * int64(len(s))); err != nil {
			return "", err
		}
		return repeat(n, s), nil
	}
	for _, name := range []string{"indent", "nindent"} {
		indent := f[name].(func(int, string) string)
		f[name] = func(n int, s string) (string, error) {
			if err := count(n); err != nil {
				return "", err
			}
			if err := checked(int64(len(s)) + int64(n)*int64(strings.Count(s, "\n")+2)); err != nil {
				return "", err
			}
			return indent(n, s), nil
		}
	}
	until := f["until"].(func(int) []int)
	f["until"] = func(n int) ([]int, error) {
		if err := count(n); err != nil {
			return nil, err
		}
		return until(n), nil
	}
	untilStep := f["untilStep"].(func(int, int, int) []int)
	f["untilStep"] = func(start, stop, step int) ([]int, error) {
		if step == 0 || math.Abs(float64(start)) > maxCount || math.Abs(float64(stop)) > maxCount || math.Abs((float64(stop)-float64(start))/float64(step)) > maxRepeat {
			return nil, fmt.Errorf("untilStep %d %d %d: more than %d steps", start, stop, step, maxRepeat)
		}
		return untilStep(start, stop, step), nil
	}
	replace := f["replace"].(func(string, string, string) string)
	f["replace"] = func(old, new, s string) (string, error) {
		if err := checked(replaced(len(s), len(old), len(new))); err != nil {
			return "", err
		}
		return replace(old, new, s), nil
	}
	for _, name := range []string{"regexReplaceAll", "regexReplaceAllLiteral"} {
		re := f[name].(func(string, string, string) string)
		f[name] = func(regex, s, repl string) (string, error) {
			if err := checked(replaced(len(s), 0, len(repl))); err != nil {
				return "", err
			}
			return re(regex, s, repl), nil
		}
	}
	f["printf"] = func(format string, args ...interface{}) (string, error) {
		if wideFormat.MatchString(format) {
			return "", fmt.Errorf("printf %q: widths and precisions are at most 9999", format)
		}
		return fmt.Sprintf(format, args...), nil
	}
	f["print"] = fmt.Sprint
	f["println"] = fmt.Sprintln
	f["html"] = template.HTMLEscaper
	f["js"] = template.JSEscaper
	f["urlquery"] = template.URLQueryEscaper
	for name, fn := range f {
		f[name] = charging(fn, b)
	}
	return f
}

// replaced is the most bytes replacing old (empty: between every byte) with new in
// a string of n bytes can make.
func replaced(n, old, new int) int64 {
	matches := int64(n) + 1
	if old > 0 {
		matches = int64(n/old) + 1
	}
	return int64(n) + matches*int64(new)
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()

// charging wraps fn so that its result is charged to b, an error once b is spent.
func charging(fn interface{}, b *budget) interface{} {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func || t.NumOut() == 0 || t.NumOut() > 2 {
		return fn
	}
	ins := make([]reflect.Type, t.NumIn())
	for i := range ins {
		ins[i] = t.In(i)
	}
	outs := []reflect.Type{t.Out(0), errorType}
	wrapped := reflect.FuncOf(ins, outs, t.IsVariadic())
	return reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
		var res []reflect.Value
		if t.IsVariadic() {
			res = v.CallSlice(args)
		} else {
			res = v.Call(args)
		}
		errValue := reflect.Zero(errorType)
		if len(res) == 2 && !res[1].IsNil() {
			return []reflect.Value{res[0], res[1]}
		}
		if err := b.charge(sizeOf(res[0])); err != nil {
			errValue = reflect.ValueOf(&err).Elem()
		}
		return []reflect.Value{res[0], errValue}
	}).Interface()
}

// sizeOf is about how many bytes v holds: strings and byte slices their length,
// lists and maps a word per element more.
func sizeOf(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return int64(v.Len())
		}
		n := int64(v.Len()) * 16
		for i := 0; i < v.Len() && i < 1000; i++ {
			n += sizeOf(v.Index(i))
		}
		return n
	case reflect.Map:
		return int64(v.Len()) * 32
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 8
		}
		return sizeOf(v.Elem())
	}
	return 8
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
