package target

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// allowedFuncs are the sprig functions templates may call: each was read for what it
// costs, and none can make much more than it is given unless templateFuncs checks it
// first. A sprig function not named here or in refusedFuncs (one a new sprig adds) is
// not defined until someone reads it; TestEverySprigFunctionIsClassified says so.
var allowedFuncs = []string{
	// Strings: at most a few times what they are given.
	"hello", "abbrev", "abbrevboth", "trunc", "trim", "upper", "lower", "title", "untitle", "substr",
	"trimall", "trimAll", "trimSuffix", "trimPrefix", "nospace", "initials", "swapcase", "snakecase",
	"camelcase", "kebabcase", "contains", "hasPrefix", "hasSuffix", "quote", "squote", "cat", "plural",
	"sha1sum", "sha256sum", "sha512sum", "adler32sum", "toString", "toStrings", "b64enc", "b64dec",
	"b32enc", "b32dec", "regexQuoteMeta", "base", "dir", "clean", "ext", "isAbs", "osBase", "osClean",
	"osDir", "osExt", "osIsAbs", "urlParse", "urlJoin", "semver", "semverCompare", "fail",
	// Numbers and time given as input (not the hub's clock).
	"atoi", "int64", "int", "float64", "toDecimal", "add1", "add", "sub", "div", "mod", "mul", "add1f",
	"addf", "subf", "divf", "mulf", "biggest", "max", "min", "maxf", "minf", "ceil", "floor", "round",
	"duration", "durationRound", "toDate", "mustToDate",
	// Tests and choices.
	"default", "empty", "coalesce", "all", "any", "ternary", "typeOf", "typeIs", "typeIsLike", "kindOf",
	"kindIs", "deepEqual", "has", "mustHas",
	// Lists and dicts: new ones hold what they are given; their printed size is counted.
	"tuple", "list", "dict", "get", "hasKey", "pluck", "keys", "pick", "omit", "values", "append",
	"mustAppend", "push", "mustPush", "prepend", "mustPrepend", "first", "mustFirst", "rest", "mustRest", "last", "mustLast",
	"initial", "mustInitial", "reverse", "mustReverse", "slice", "mustSlice", "concat", "dig", "chunk",
	"mustChunk", "compact", "mustCompact", "sortAlpha", "deepCopy", "mustDeepCopy", "unset",
	"toJson", "toPrettyJson", "toRawJson", "mustToJson", "mustToPrettyJson", "mustToRawJson",
	// Checked by templateFuncs before they run.
	"repeat", "indent", "nindent", "replace", "until", "untilStep", "join", "wrap", "wrapWith",
	"split", "splitList", "splitn", "regexMatch", "mustRegexMatch", "regexFind", "mustRegexFind",
	"regexFindAll", "mustRegexFindAll", "regexSplit", "mustRegexSplit", "regexReplaceAll",
	"mustRegexReplaceAll", "regexReplaceAllLiteral", "mustRegexReplaceAllLiteral", "fromJson",
	"mustFromJson", "uniq", "mustUniq", "without", "mustWithout", "set", "merge", "mergeOverwrite",
	"mustMerge", "mustMergeOverwrite",
}

// refusedFuncs are sprig functions templates may not call: those that read the hub's
// environment or network, those whose result changes from one call to the next
// (values would differ at every look, and the cluster be redeployed each time), and
// those that cost far more than their input (key generation, password hashing,
// parsing keys of any size).
var refusedFuncs = []string{
	"env", "expandenv", "getHostByName", "include", "tpl", "seq",
	"now", "date", "dateInZone", "date_in_zone", "dateModify", "date_modify", "mustDateModify", "must_date_modify", "ago", "unixEpoch", "htmlDate", "htmlDateInZone",
	"randAlpha", "randAlphaNum", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"derivePassword", "bcrypt", "htpasswd", "encryptAES", "decryptAES", "buildCustomCert",
}

// wideFormat: a printf width or precision of five digits or more, or one taken from
// the arguments.
var wideFormat = regexp.MustCompile(`%[-+# 0]*(\d{5,}|\*)|\.(\d{5,}|\*)`)

// maxRegexWork bounds a regular expression's length times its subject's: Go's regexp
// runs in time linear in both, but not in their product's favour.
const maxRegexWork = 1 << 24

// pieceCost is what one piece of a split or a match list takes.
const pieceCost = 32

// templateFuncs are allowedFuncs and Go's print functions. Each measures what it is
// given against b's work and charges what it returns to b; those that can make far
// more than they are given check first what they would make, and those that change a
// dict refuse to make it hold itself.
func templateFuncs(b *budget) template.FuncMap {
	sprigFuncs := sprig.TxtFuncMap()
	f := template.FuncMap{}
	for _, name := range allowedFuncs {
		if fn, ok := sprigFuncs[name]; ok {
			f[name] = fn
		}
	}
	count := func(n int) error {
		if n < 0 || n > maxRepeat {
			return fmt.Errorf("count %d is not between 0 and %d", n, maxRepeat)
		}
		return nil
	}
	regexWork := func(regex, s string) error {
		if int64(len(regex)+1)*int64(len(s)+1) > maxRegexWork {
			return fmt.Errorf("a regular expression of %d bytes on %d bytes: at most %d for both multiplied", len(regex), len(s), maxRegexWork)
		}
		return nil
	}
	// pieces bounds a split or a list of matches: n as given, or as many as may fit.
	pieces := func(n int) int {
		most := int(b.left/pieceCost) + 1
		if n < 0 || n > most {
			return most
		}
		return n
	}
	tooMany := func(got, asked int) error {
		if asked >= 0 && got <= asked || got < pieces(-1) {
			return nil
		}
		return errBudget
	}

	repeat := f["repeat"].(func(int, string) string)
	f["repeat"] = func(n int, s string) (string, error) {
		if err := count(n); err != nil {
			return "", err
		}
		if err := b.fits(int64(n) * int64(len(s))); err != nil {
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
			if err := b.fits(int64(len(s)) + int64(n)*int64(strings.Count(s, "\n")+2)); err != nil {
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
		if err := b.fits(replaced(len(s), len(old), len(new))); err != nil {
			return "", err
		}
		return replace(old, new, s), nil
	}
	for _, name := range []string{"regexReplaceAll", "mustRegexReplaceAll", "regexReplaceAllLiteral", "mustRegexReplaceAllLiteral"} {
		literal := strings.HasSuffix(name, "Literal")
		call := errorFunc3(f[name])
		f[name] = func(regex, s, repl string) (string, error) {
			if err := regexWork(regex, s); err != nil {
				return "", err
			}
			most := replaced(len(s), 0, len(repl))
			if !literal {
				// Each $ in repl may stand for a whole match.
				most += int64(strings.Count(repl, "$")) * int64(len(s))
			}
			if err := b.fits(most); err != nil {
				return "", err
			}
			return call(regex, s, repl)
		}
	}
	for _, name := range []string{"regexMatch", "mustRegexMatch"} {
		match := f[name]
		f[name] = func(regex, s string) (interface{}, error) {
			if err := regexWork(regex, s); err != nil {
				return false, err
			}
			return callFunc(match, regex, s)
		}
	}
	for _, name := range []string{"regexFind", "mustRegexFind"} {
		find := f[name]
		f[name] = func(regex, s string) (interface{}, error) {
			if err := regexWork(regex, s); err != nil {
				return "", err
			}
			return callFunc(find, regex, s)
		}
	}
	for _, name := range []string{"regexFindAll", "mustRegexFindAll", "regexSplit", "mustRegexSplit"} {
		all := f[name]
		f[name] = func(regex, s string, n int) (interface{}, error) {
			if err := regexWork(regex, s); err != nil {
				return nil, err
			}
			out, err := callFunc(all, regex, s, pieces(n))
			if err != nil {
				return nil, err
			}
			if err := tooMany(len(out.([]string)), n); err != nil {
				return nil, err
			}
			return out, nil
		}
	}
	for _, name := range []string{"splitList", "split"} {
		split := f[name]
		f[name] = func(sep, s string) (interface{}, error) {
			if err := b.fits(int64(splits(s, sep)) * pieceCost); err != nil {
				return nil, err
			}
			return callFunc(split, sep, s)
		}
	}
	splitn := f["splitn"]
	f["splitn"] = func(sep string, n int, s string) (interface{}, error) {
		if err := b.fits(int64(min(pieces(n), splits(s, sep))) * pieceCost); err != nil {
			return nil, err
		}
		return callFunc(splitn, sep, n, s)
	}
	join := f["join"].(func(string, interface{}) string)
	f["join"] = func(sep string, v interface{}) (string, error) {
		if err := b.fits(int64(length(v)) * int64(len(sep))); err != nil {
			return "", err
		}
		return join(sep, v), nil
	}
	wrapWith := f["wrapWith"].(func(int, string, string) string)
	f["wrapWith"] = func(n int, sep, s string) (string, error) {
		if err := b.fits(int64(len(s)) + int64(len(s)+1)*int64(len(sep))); err != nil {
			return "", err
		}
		return wrapWith(n, sep, s), nil
	}
	wrap := f["wrap"].(func(int, string) string)
	f["wrap"] = func(n int, s string) (string, error) {
		if err := b.fits(2*int64(len(s)) + 1); err != nil {
			return "", err
		}
		return wrap(n, s), nil
	}
	for _, name := range []string{"fromJson", "mustFromJson"} {
		from := f[name]
		f[name] = func(s string) (interface{}, error) {
			// What JSON of n bytes reads into takes a few times n; the result is then
			// measured as every result is.
			if err := b.fits(int64(len(s))); err != nil {
				return nil, err
			}
			return callFunc(from, s)
		}
	}
	for _, name := range []string{"uniq", "mustUniq"} {
		uniq := f[name]
		f[name] = func(v interface{}) (interface{}, error) {
			// Each element is compared with those kept: at most the list's length times
			// its size.
			size, err := measureOr(reflect.ValueOf(v), b.work, errWork)
			if err != nil {
				return nil, err
			}
			if err := b.spend(int64(length(v)) * size); err != nil {
				return nil, err
			}
			return callFunc(uniq, v)
		}
	}
	for _, name := range []string{"without", "mustWithout"} {
		without := f[name]
		f[name] = func(v interface{}, omit ...interface{}) (interface{}, error) {
			size, err := measureOr(reflect.ValueOf(v), b.work, errWork)
			if err != nil {
				return nil, err
			}
			if err := b.spend(int64(len(omit)) * size); err != nil {
				return nil, err
			}
			return callFunc(without, append([]interface{}{v}, omit...)...)
		}
	}
	set := f["set"].(func(map[string]interface{}, string, interface{}) map[string]interface{})
	f["set"] = func(d map[string]interface{}, key string, value interface{}) (map[string]interface{}, error) {
		if err := notWithin(d, b, value); err != nil {
			return nil, err
		}
		return set(d, key, value), nil
	}
	for _, name := range []string{"merge", "mergeOverwrite", "mustMerge", "mustMergeOverwrite"} {
		merge := f[name]
		f[name] = func(dst map[string]interface{}, srcs ...map[string]interface{}) (interface{}, error) {
			others := make([]interface{}, len(srcs))
			for i, s := range srcs {
				others[i] = s
			}
			if err := notWithin(dst, b, others...); err != nil {
				return nil, err
			}
			return callFunc(merge, append([]interface{}{dst}, others...)...)
		}
	}
	f["printf"] = func(format string, args ...interface{}) (string, error) {
		if wideFormat.MatchString(format) {
			return "", fmt.Errorf("printf %q: widths and precisions are at most 9999", format)
		}
		// A verb may name an argument ("%[1]v"), so each may print the largest one.
		var largest int64
		for _, a := range args {
			n, err := b.size(a)
			if err != nil {
				return "", err
			}
			largest = max(largest, n)
		}
		if err := b.fits(int64(len(format)) + int64(strings.Count(format, "%"))*largest); err != nil {
			return "", err
		}
		return fmt.Sprintf(format, args...), nil
	}
	f["print"] = fmt.Sprint
	f["println"] = fmt.Sprintln
	f["html"] = template.HTMLEscaper
	f["js"] = template.JSEscaper
	f["urlquery"] = template.URLQueryEscaper
	for name, fn := range f {
		f[name] = guarded(fn, b)
	}
	return f
}

// notWithin refuses to put values into d when one of them holds d: d would then hold
// itself, and every printer and walker would follow it for ever.
func notWithin(d map[string]interface{}, b *budget, values ...interface{}) error {
	if d == nil {
		return nil
	}
	target := reflect.ValueOf(d).Pointer()
	for _, v := range values {
		ok, err := reaches(reflect.ValueOf(v), target, b.work)
		if err != nil {
			if err == errOverLimit {
				return errWork
			}
			return err
		}
		if ok {
			return fmt.Errorf("a dict cannot be put into itself")
		}
	}
	return nil
}

// splits is how many pieces splitting s at sep makes.
func splits(s, sep string) int {
	if sep == "" {
		return len(s) + 1
	}
	return strings.Count(s, sep) + 1
}

// length is how many elements a list has, 1 for anything else.
func length(v interface{}) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return rv.Len()
	}
	return 1
}

// callFunc calls a sprig function of any shape, its error (if it returns one) apart.
func callFunc(fn interface{}, args ...interface{}) (interface{}, error) {
	v := reflect.ValueOf(fn)
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		if a == nil {
			in[i] = reflect.Zero(v.Type().In(min(i, v.Type().NumIn()-1)))
			if v.Type().IsVariadic() && i >= v.Type().NumIn()-1 {
				in[i] = reflect.Zero(v.Type().In(v.Type().NumIn() - 1).Elem())
			}
			continue
		}
		in[i] = reflect.ValueOf(a)
	}
	out := v.Call(in)
	if len(out) == 2 && !out[1].IsNil() {
		return nil, out[1].Interface().(error)
	}
	return out[0].Interface(), nil
}

// errorFunc3 makes a three-string sprig function, with or without an error, one with.
func errorFunc3(fn interface{}) func(string, string, string) (string, error) {
	switch f := fn.(type) {
	case func(string, string, string) string:
		return func(a, b, c string) (string, error) { return f(a, b, c), nil }
	case func(string, string, string) (string, error):
		return f
	}
	panic(fmt.Sprintf("sprig function of type %T", fn))
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

// guarded wraps fn so that its arguments are measured against b's work before it runs
// (a value nested too deep is refused there) and its result is measured and charged
// to b after: every value a template holds is then known to be bounded in size and
// depth, and printing it cannot run away.
func guarded(fn interface{}, b *budget) interface{} {
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
	fail := func(err error) []reflect.Value {
		return []reflect.Value{reflect.Zero(t.Out(0)), reflect.ValueOf(&err).Elem()}
	}
	return reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
		for _, a := range args {
			n, err := measureOr(a, b.work, errWork)
			if err == nil {
				err = b.spend(n)
			}
			if err != nil {
				return fail(err)
			}
		}
		var res []reflect.Value
		if t.IsVariadic() {
			res = v.CallSlice(args)
		} else {
			res = v.Call(args)
		}
		if len(res) == 2 && !res[1].IsNil() {
			return []reflect.Value{res[0], res[1]}
		}
		n, err := measureOr(res[0], b.left, errBudget)
		if err == nil {
			err = b.charge(n)
		}
		if err != nil {
			return fail(err)
		}
		return []reflect.Value{res[0], reflect.Zero(errorType)}
	}).Interface()
}
