package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestGenericMapRoundTripsAsAPlainObject(t *testing.T) {
	in := []byte(`{"image":{"tag":"v1"},"replicas":2,"list":[1,"a",true]}`)
	var m GenericMap
	if err := json.Unmarshal(in, &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	_ = json.Unmarshal(in, &a)
	_ = json.Unmarshal(out, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip changed the values: %s", out)
	}
}

func TestGenericMapDeepCopyIsIndependentAndNeverPanics(t *testing.T) {
	// Values built in Go (int, nested typed maps) are not what a JSON decoder makes;
	// the copy must still work.
	m := &GenericMap{Data: map[string]any{"replicas": 2, "image": map[string]any{"tag": "v1"}, "ports": []int{80}}}
	c := m.DeepCopy()
	c.Data["image"].(map[string]any)["tag"] = "v2"
	if m.Data["image"].(map[string]any)["tag"] != "v1" {
		t.Fatal("the copy shares nested maps with the original")
	}
	if (*GenericMap)(nil).DeepCopy() != nil {
		t.Fatal("copy of nil is not nil")
	}
	empty := (&GenericMap{}).DeepCopy()
	if empty.Data != nil {
		t.Fatal("copy of an empty map is not empty")
	}
	unencodable := &GenericMap{Data: map[string]any{"f": func() {}}}
	if got := unencodable.DeepCopy(); len(got.Data) != 1 {
		t.Fatal("a map that cannot be encoded lost its keys")
	}
}
