package catalogfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A customer's metadata is a JSON object to quotad and a YAML mapping in a
// file. Numbers keep their digits both ways (1.50 stays 1.50), so a
// round trip through a file changes nothing.

// fieldError is a problem in metadata, at its node's line.
type fieldError struct {
	line       int
	field, msg string
}

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// nodeToJSON returns the JSON object a metadata mapping stands for.
func nodeToJSON(n *yaml.Node, field string) (json.RawMessage, *fieldError) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, &fieldError{n.Line, field, "must be a mapping, got " + describe(n)}
	}
	budget := maxNodes
	v, ferr := toJSONValue(n, field, &budget)
	if ferr != nil {
		return nil, ferr
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &fieldError{n.Line, field, err.Error()}
	}
	return b, nil
}

func toJSONValue(n *yaml.Node, field string, budget *int) (any, *fieldError) {
	n = resolve(n)
	if *budget--; *budget < 0 {
		return nil, &fieldError{n.Line, field, fmt.Sprintf("expands to more than %d nodes", maxNodes)}
	}
	switch n.Kind {
	case yaml.MappingNode:
		obj := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				return nil, &fieldError{k.Line, field, "keys must be strings, got " + describe(k)}
			}
			child := field + "." + k.Value
			if _, dup := obj[k.Value]; dup {
				return nil, &fieldError{k.Line, child, "duplicate key"}
			}
			v, err := toJSONValue(n.Content[i+1], child, budget)
			if err != nil {
				return nil, err
			}
			obj[k.Value] = v
		}
		return obj, nil
	case yaml.SequenceNode:
		arr := make([]any, len(n.Content))
		for i, item := range n.Content {
			v, err := toJSONValue(item, fmt.Sprintf("%s[%d]", field, i), budget)
			if err != nil {
				return nil, err
			}
			arr[i] = v
		}
		return arr, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, &fieldError{n.Line, field, "must be true or false, got " + describe(n)}
			}
			return b, nil
		case "!!int", "!!float":
			if jsonNumber.MatchString(n.Value) {
				return json.Number(plainDecimal(n.Value)), nil
			}
			var f float64
			if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, &fieldError{n.Line, field, "must be a finite number, got " + describe(n)}
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		default:
			return n.Value, nil
		}
	}
	return nil, &fieldError{n.Line, field, "cannot be " + describe(n)}
}

// maxExponent bounds the exponents plainDecimal writes out in full.
const maxExponent = 1000

// plainDecimal writes a JSON number's exponent out, as PostgreSQL keeps
// numbers in JSON (1e-7 is stored and answered as 0.0000001, 1.50e1 as
// 15.0): the digits after the point are the mantissa's less the exponent,
// never fewer than none. Without it a number written with an exponent
// would differ from the server's at every apply. Numbers without an
// exponent, or with one beyond maxExponent, are returned as they are.
func plainDecimal(num string) string {
	mant, exp, ok := strings.Cut(strings.ToLower(num), "e")
	if !ok {
		return num
	}
	e, err := strconv.Atoi(exp)
	if err != nil || e > maxExponent || e < -maxExponent {
		return num
	}
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	point := len(whole) + e // the point's place in digits
	scale := max(0, len(frac)-e)
	switch {
	case point <= 0:
		digits = strings.Repeat("0", 1-point) + digits
		point = 1
	case point > len(digits):
		digits += strings.Repeat("0", point-len(digits))
	}
	intPart := strings.TrimLeft(digits[:point], "0")
	if intPart == "" {
		intPart = "0"
	}
	fracPart := digits[point:]
	for len(fracPart) < scale {
		fracPart += "0"
	}
	fracPart = fracPart[:scale] // the digits beyond the scale are zeros
	if strings.Trim(intPart+fracPart, "0") == "" {
		sign = "" // PostgreSQL has no negative zero
	}
	if fracPart == "" {
		return sign + intPart
	}
	return sign + intPart + "." + fracPart
}

// jsonToNode returns the YAML mapping for a JSON object, keys sorted; nil
// for an empty or missing object.
func jsonToNode(raw json.RawMessage) (*yaml.Node, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	if obj, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("metadata: not a JSON object")
	} else if len(obj) == 0 {
		return nil, nil
	}
	return toNode(v), nil
}

func toNode(v any) *yaml.Node {
	switch t := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, toNode(t[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range t {
			n.Content = append(n.Content, toNode(e))
		}
		return n
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t)}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}
