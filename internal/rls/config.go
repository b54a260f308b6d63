package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The default entry keys of a descriptor.
const (
	DefaultCustomerKey = "customer"
	DefaultAPIKeyKey   = "api_key"
	DefaultMetricKey   = "metric"
	DefaultSubjectKey  = "subject"
)

// Rules say how descriptors become items of a check: which entry keys
// name the customer, the API key, the metric and the subject, what a
// descriptor naming an unknown customer, key or metric gets, and which
// domains count their hits even over the limit. A Rules is immutable.
type Rules struct {
	customerKey, apiKeyKey, metricKey, subjectKey string
	allowUnknown                                  bool
	// overLimit are the domains whose hits are counted even over the
	// limit (count_over_limit).
	overLimit map[string]bool
}

// countsOverLimit reports whether the hits of domain's requests are
// counted even when over the limit (the work is done), their answer then
// OVER_LIMIT.
func (r *Rules) countsOverLimit(domain string) bool {
	return len(r.overLimit) > 0 && r.overLimit[domain]
}

// DefaultRules are the rules without a file: entries customer, api_key,
// metric and subject; unknown names deny.
func DefaultRules() *Rules {
	return &Rules{customerKey: DefaultCustomerKey, apiKeyKey: DefaultAPIKeyKey, metricKey: DefaultMetricKey,
		subjectKey: DefaultSubjectKey}
}

// LoadRules reads the rules from the YAML file at path.
func LoadRules(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rls config: %w", err)
	}
	r, err := ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("rls config %s: %w", path, err)
	}
	return r, nil
}

// The file's fields, by section ("" is the top level).
var fileFields = map[string][]string{
	"":        {"entries", "unknown", "domains"},
	"entries": {"customer", "api_key", "metric", "subject"},
	"domains": {"count_over_limit"}, // each domain's
}

// ParseRules parses rules from YAML:
//
//	entries:            # the entry keys that give a check's parts
//	  customer: customer
//	  api_key: api_key
//	  metric: metric
//	  subject: subject  # who within the customer: limits per subject
//	unknown: deny       # or allow
//	domains:            # settings of requests' domains, by name
//	  llm_tokens:
//	    count_over_limit: true # hits are counted even over the limit
//
// count_over_limit (default false) is for hits reported once the work is
// done, such as the tokens of an LLM's answer that Envoy AI Gateway
// reports once it has streamed: they are counted even when over the limit
// (a long answer is not free), and the answer is then OVER_LIMIT.
//
// Every field is optional. Unknown fields, duplicate keys, values of the
// wrong kind and more than one document are errors naming their line, so
// that a typo stops quotad at start-up.
func ParseRules(data []byte) (*Rules, error) {
	r := DefaultRules()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return r, nil // an empty file: the defaults
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one YAML document")
	}
	if len(doc.Content) == 0 {
		return r, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return r, nil
	}
	err := eachField(top, "", func(key, value *yaml.Node) error {
		switch key.Value {
		case "entries":
			return eachField(value, "entries", func(k, v *yaml.Node) error {
				s, err := scalar(k, v, "entries."+k.Value)
				if err != nil {
					return err
				}
				if s == "" {
					return fmt.Errorf("line %d: entries.%s: want an entry key, got an empty one", v.Line, k.Value)
				}
				*map[string]*string{"customer": &r.customerKey, "api_key": &r.apiKeyKey, "metric": &r.metricKey,
					"subject": &r.subjectKey}[k.Value] = s
				return nil
			})
		case "domains":
			return r.parseDomains(value)
		default: // unknown
			s, err := scalar(key, value, "unknown")
			if err != nil {
				return err
			}
			switch s {
			case "deny":
			case "allow":
				r.allowUnknown = true
			default:
				return fmt.Errorf("line %d: unknown: want deny or allow, got %q", value.Line, s)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{r.customerKey: true, r.apiKeyKey: true, r.metricKey: true, r.subjectKey: true}
	if len(keys) != 4 {
		return nil, fmt.Errorf("entries: customer %q, api_key %q, metric %q and subject %q must be four different keys",
			r.customerKey, r.apiKeyKey, r.metricKey, r.subjectKey)
	}
	return r, nil
}

// parseDomains reads the domains section: a mapping of domain names to
// their settings.
func (r *Rules) parseDomains(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: domains: want a mapping of domain names to their settings (count_over_limit)", n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		switch {
		case k.Kind != yaml.ScalarNode || name == "":
			return fmt.Errorf("line %d: domains: want a domain's name", k.Line)
		case seen[name]:
			return fmt.Errorf("line %d: domain %q given twice", k.Line, name)
		}
		seen[name] = true
		err := eachFieldOf(v, "domains."+name, fileFields["domains"], func(key, value *yaml.Node) error {
			var on bool
			if value.Kind != yaml.ScalarNode || value.Tag != "!!bool" || value.Decode(&on) != nil {
				return fmt.Errorf("line %d: domains.%s.count_over_limit: want true or false", key.Line, name)
			}
			if on {
				if r.overLimit == nil {
					r.overLimit = map[string]bool{}
				}
				r.overLimit[name] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// eachField calls f with each key and value of mapping n, the section
// named section, after checking that the key is one of the section's
// fields and appears once.
func eachField(n *yaml.Node, section string, f func(key, value *yaml.Node) error) error {
	return eachFieldOf(n, section, fileFields[section], f)
}

// eachFieldOf is eachField for a section whose fields are fields.
func eachFieldOf(n *yaml.Node, section string, fields []string, f func(key, value *yaml.Node) error) error {
	where := "at the top level"
	if section != "" {
		where = "in " + section
	}
	if n.Kind != yaml.MappingNode {
		if section == "" {
			return fmt.Errorf("line %d: want a mapping with %s", n.Line, strings.Join(fields, ", "))
		}
		return fmt.Errorf("line %d: %s: want a mapping with %s", n.Line, section, strings.Join(fields, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		known := false
		for _, name := range fields {
			known = known || name == k.Value
		}
		if !known {
			return fmt.Errorf("line %d: unknown field %q %s: want one of %s", k.Line, k.Value, where, strings.Join(fields, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: field %q %s given twice", k.Line, k.Value, where)
		}
		seen[k.Value] = true
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

// scalar returns the string value v of field name, or an error naming
// its line when it is not a plain string.
func scalar(k, v *yaml.Node, name string) (string, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "!!null") {
		return "", fmt.Errorf("line %d: %s: want a string", k.Line, name)
	}
	return v.Value, nil
}
