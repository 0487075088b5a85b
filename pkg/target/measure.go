package target

import (
	"errors"
	"fmt"
	"reflect"
)

// errTooDeep: a value nested deeper than maxValuesDepth, or one that holds itself.
var errTooDeep = fmt.Errorf("a value is nested more than %d deep, or holds itself", maxValuesDepth)

// errOverLimit: measure stopped at its limit.
var errOverLimit = errors.New("over the limit")

// Each list element and map entry costs a word of overhead and two bytes of
// indentation per level, so that what a printer (toYaml, toPrettyJson, print) makes
// of a value is at most a small multiple of its measure.
const (
	scalarCost  = 8
	elementCost = 8
	indentCost  = 2
)

// measure says about how many bytes v takes printed, walking at most limit of them
// and maxValuesDepth levels: the walk costs no more than what it counts, a value that
// refers to itself is errTooDeep, and one that shares a part many times is counted
// as printed, each time.
func measure(v reflect.Value, limit int64) (int64, error) {
	m := measurer{left: limit}
	if err := m.walk(v, 0); err != nil {
		return 0, err
	}
	return limit - m.left, nil
}

// measureOr is measure with errOverLimit replaced by over: the budget that ran out.
func measureOr(v reflect.Value, limit int64, over error) (int64, error) {
	n, err := measure(v, limit)
	if errors.Is(err, errOverLimit) {
		return 0, over
	}
	return n, err
}

type measurer struct{ left int64 }

func (m *measurer) add(n int64) error {
	if m.left -= n; m.left < 0 {
		return errOverLimit
	}
	return nil
}

func (m *measurer) walk(v reflect.Value, depth int) error {
	if depth > maxValuesDepth {
		return errTooDeep
	}
	switch v.Kind() {
	case reflect.Invalid:
		return m.add(scalarCost)
	case reflect.String:
		return m.add(int64(v.Len()) + scalarCost)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return m.add(int64(v.Len()) + scalarCost)
		}
		if err := m.add(scalarCost); err != nil {
			return err
		}
		for i := 0; i < v.Len(); i++ {
			if err := m.add(elementCost + indentCost*int64(depth)); err != nil {
				return err
			}
			if err := m.walk(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if err := m.add(scalarCost); err != nil {
			return err
		}
		iter := v.MapRange()
		for iter.Next() {
			if err := m.add(elementCost + indentCost*int64(depth)); err != nil {
				return err
			}
			if err := m.walk(iter.Key(), depth+1); err != nil {
				return err
			}
			if err := m.walk(iter.Value(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case reflect.Struct:
		if err := m.add(scalarCost); err != nil {
			return err
		}
		for i := 0; i < v.NumField(); i++ {
			if err := m.walk(v.Field(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return m.add(scalarCost)
		}
		return m.walk(v.Elem(), depth+1)
	}
	return m.add(scalarCost)
}

// reaches says whether v holds the map or slice target anywhere within it, looking at
// no more than limit bytes of v (errOverLimit past them).
func reaches(v reflect.Value, target uintptr, limit int64) (bool, error) {
	m := measurer{left: limit}
	return m.reaches(v, target, 0)
}

func (m *measurer) reaches(v reflect.Value, target uintptr, depth int) (bool, error) {
	if depth > maxValuesDepth {
		return false, errTooDeep
	}
	if err := m.add(elementCost); err != nil {
		return false, err
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return false, nil
		}
		if v.Kind() == reflect.Pointer && v.Pointer() == target {
			return true, nil
		}
		return m.reaches(v.Elem(), target, depth+1)
	case reflect.Map:
		if v.IsNil() {
			return false, nil
		}
		if v.Pointer() == target {
			return true, nil
		}
		iter := v.MapRange()
		for iter.Next() {
			if ok, err := m.reaches(iter.Value(), target, depth+1); ok || err != nil {
				return ok, err
			}
		}
	case reflect.Slice:
		if v.Len() > 0 && v.Pointer() == target {
			return true, nil
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if ok, err := m.reaches(v.Index(i), target, depth+1); ok || err != nil {
				return ok, err
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if ok, err := m.reaches(v.Field(i), target, depth+1); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}
