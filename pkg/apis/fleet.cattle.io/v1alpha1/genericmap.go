package v1alpha1

import (
	"encoding/json"
)

// GenericMap is free-form YAML/JSON, such as Helm values. It is stored as an object
// whose fields the API server keeps as they are.
//
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
// +k8s:deepcopy-gen=false
type GenericMap struct {
	Data map[string]interface{} `json:"-"`
}

// MarshalJSON writes the map itself, not a wrapper object.
func (in GenericMap) MarshalJSON() ([]byte, error) {
	if in.Data == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(in.Data)
}

// UnmarshalJSON reads any JSON object.
func (in *GenericMap) UnmarshalJSON(data []byte) error {
	in.Data = map[string]interface{}{}
	return json.Unmarshal(data, &in.Data)
}

// DeepCopyInto copies the map through a JSON round trip, so values of any Go type that
// encodes as JSON (not only what a decoder produces) are copied without a panic.
func (in *GenericMap) DeepCopyInto(out *GenericMap) {
	if in.Data == nil {
		out.Data = nil
		return
	}
	raw, err := json.Marshal(in.Data)
	if err == nil {
		copied := map[string]interface{}{}
		if err = json.Unmarshal(raw, &copied); err == nil {
			out.Data = copied
			return
		}
	}
	// Not representable as JSON, so it could never have been stored: keep a shallow copy.
	out.Data = make(map[string]interface{}, len(in.Data))
	for k, v := range in.Data {
		out.Data[k] = v
	}
}

// DeepCopy returns a copy of the map.
func (in *GenericMap) DeepCopy() *GenericMap {
	if in == nil {
		return nil
	}
	out := new(GenericMap)
	in.DeepCopyInto(out)
	return out
}
