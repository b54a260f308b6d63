package catalogfile

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/quotad/quotad/internal/tiers"
)

// A plan's features are YAML scalars in a file (sso: true, max_projects:
// 10, support: priority) and JSON values to quotad; tiers.ParseFeatureValue
// judges them once turned into JSON, so that a file and the API refuse the
// same values with the same words.

// featureJSON returns the JSON text a file's feature value stands for:
// null for one left empty, which quotad refuses as it refuses any value
// that is not a boolean, an integer or a string.
func featureJSON(n *yaml.Node) json.RawMessage {
	if n == nil {
		return json.RawMessage("null")
	}
	budget := maxNodes
	v, ferr := toJSONValue(n, "", &budget)
	if ferr != nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// featureNode returns the YAML scalar of a feature's value.
func featureNode(v tiers.FeatureValue) *yaml.Node {
	switch x := v.Any().(type) {
	case int64:
		return toNode(json.Number(strconv.FormatInt(x, 10)))
	default:
		return toNode(x)
	}
}

// featureSpecs returns a file's features as a PlanSpec takes them.
func featureSpecs(features map[string]*yaml.Node) map[string]json.RawMessage {
	if features == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(features))
	for key, n := range features {
		out[key] = featureJSON(n)
	}
	return out
}

// featureFields returns a plan's features as Diff compares and prints
// them: by key, each its JSON text.
func featureFields(features map[string]*yaml.Node) []field {
	var fs []field
	for _, key := range slices.Sorted(maps.Keys(features)) {
		fs = append(fs, field{"features." + key, string(featureJSON(features[key]))})
	}
	return fs
}

// FeatureValues returns the plan's features as JSON values: a bool, an
// int64 (a json.Number for a number that is no integer, which quotad
// refuses) or a string each; nil when it has none.
func (p *Plan) FeatureValues() map[string]any {
	if len(p.Features) == 0 {
		return nil
	}
	out := make(map[string]any, len(p.Features))
	for key, n := range p.Features {
		dec := json.NewDecoder(bytes.NewReader(featureJSON(n)))
		dec.UseNumber()
		var v any
		_ = dec.Decode(&v) // featureJSON is valid JSON
		if num, ok := v.(json.Number); ok {
			if i, err := num.Int64(); err == nil {
				v = i
			}
		}
		out[key] = v
	}
	return out
}

// SetFeatureValues sets the plan's features from JSON values, as quotad
// answers them (bools, integers and strings; numbers as int64, int,
// float64 or json.Number); nil or empty leaves it none.
func (p *Plan) SetFeatureValues(values map[string]any) {
	if len(values) == 0 {
		p.Features = nil
		return
	}
	p.Features = make(map[string]*yaml.Node, len(values))
	for key, v := range values {
		switch x := v.(type) {
		case int64:
			v = json.Number(strconv.FormatInt(x, 10))
		case int:
			v = json.Number(strconv.Itoa(x))
		case float64:
			v = json.Number(strconv.FormatFloat(x, 'g', -1, 64))
		}
		p.Features[key] = toNode(v)
	}
}
