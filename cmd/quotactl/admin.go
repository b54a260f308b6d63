package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/catalogfile"
)

// errPreconditionFailed: a write's If-Match no longer matched (412).
var errPreconditionFailed = errors.New("precondition failed")

// problem is an error answer of quotad: an RFC 9457 problem document.
type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (p *problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", p.Status, p.Code, p.Detail)
	for _, f := range p.Errors {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	return b.String()
}

func (p *problem) Is(target error) bool {
	return target == errPreconditionFailed && p.Status == http.StatusPreconditionFailed
}

// admin speaks quotad's admin API.
type admin struct {
	base  string
	token string
	hc    *http.Client
}

func newAdmin(base, token string) *admin {
	return &admin{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a request and decodes a 2xx answer into out (unless nil).
func (a *admin) do(ctx context.Context, method, path, ifMatch string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 && !(resp.StatusCode == http.StatusTooManyRequests && path == "/v1/check") {
		p := &problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Code == "" {
			p.Code, p.Detail = http.StatusText(resp.StatusCode), strings.TrimSpace(string(data))
		}
		return p
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// list reads every page of a list endpoint; page decodes one page's items
// and returns its next_cursor.
func (a *admin) list(ctx context.Context, path string, page func([]byte) (string, error)) error {
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var raw json.RawMessage
		if err := a.do(ctx, http.MethodGet, path+"?"+q.Encode(), "", nil, &raw); err != nil {
			return err
		}
		next, err := page(raw)
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// snapshot reads the server's catalog in the file's form, with the ETag of
// every resource; customers and their overrides only when asked.
func (a *admin) snapshot(ctx context.Context, customers bool) (*catalogfile.File, map[catalogfile.Ref]string, error) {
	f := &catalogfile.File{Metrics: map[string]*catalogfile.Metric{}, Plans: map[string]*catalogfile.Plan{}}
	etags := map[catalogfile.Ref]string{}
	err := a.list(ctx, "/v1/metrics", func(raw []byte) (string, error) {
		var p struct {
			Metrics []struct {
				Key     string `json:"key"`
				Version int64  `json:"version"`
				catalogfile.Metric
			} `json:"metrics"`
			Next string `json:"next_cursor"`
		}
		err := json.Unmarshal(raw, &p)
		for _, m := range p.Metrics {
			f.Metrics[m.Key] = &m.Metric
			etags[catalogfile.MetricRef(m.Key)] = etag(m.Version)
		}
		return p.Next, err
	})
	if err != nil {
		return nil, nil, err
	}
	err = a.list(ctx, "/v1/plans", func(raw []byte) (string, error) {
		var p struct {
			Plans []struct {
				Key     string `json:"key"`
				Version int64  `json:"version"`
				catalogfile.Plan
			} `json:"plans"`
			Next string `json:"next_cursor"`
		}
		err := json.Unmarshal(raw, &p)
		for _, pl := range p.Plans {
			f.Plans[pl.Key] = &pl.Plan
			etags[catalogfile.PlanRef(pl.Key)] = etag(pl.Version)
		}
		return p.Next, err
	})
	if err != nil || !customers {
		return f, etags, err
	}
	f.Customers = map[string]*catalogfile.Customer{}
	err = a.list(ctx, "/v1/customers", func(raw []byte) (string, error) {
		var p struct {
			Customers []struct {
				ID       string          `json:"id"`
				Version  int64           `json:"version"`
				Metadata json.RawMessage `json:"metadata"`
				catalogfile.Customer
			} `json:"customers"`
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", err
		}
		for _, c := range p.Customers {
			if err := c.SetMetadataJSON(c.Metadata); err != nil {
				return "", fmt.Errorf("customer %s: %w", c.ID, err)
			}
			f.Customers[c.ID] = &c.Customer
			etags[catalogfile.CustomerRef(c.ID)] = etag(c.Version)
		}
		return p.Next, nil
	})
	if err != nil {
		return nil, nil, err
	}
	for id, c := range f.Customers {
		err := a.list(ctx, "/v1/customers/"+url.PathEscape(id)+"/overrides", func(raw []byte) (string, error) {
			var p struct {
				Overrides []struct {
					Metric  string `json:"metric"`
					Window  string `json:"window"`
					Version int64  `json:"version"`
					catalogfile.Override
				} `json:"overrides"`
				Next string `json:"next_cursor"`
			}
			err := json.Unmarshal(raw, &p)
			for _, o := range p.Overrides {
				o.Override.Metric, o.Override.Window = o.Metric, o.Window
				c.Overrides = append(c.Overrides, o.Override)
				etags[catalogfile.OverrideRef(id, o.Metric, o.Window)] = etag(o.Version)
			}
			return p.Next, err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return f, etags, nil
}

// apply makes one change, with If-Match when it has one.
func (a *admin) apply(ctx context.Context, c catalogfile.Change) error {
	var path string
	var body any
	switch c.Ref.Kind {
	case catalogfile.KindMetric:
		path, body = "/v1/metrics/"+url.PathEscape(c.Key), c.Metric
	case catalogfile.KindPlan:
		path, body = "/v1/plans/"+url.PathEscape(c.Key), c.Plan
	case catalogfile.KindCustomer:
		path = "/v1/customers/" + url.PathEscape(c.Key)
		if c.Customer != nil {
			md, err := c.Customer.MetadataJSON()
			if err != nil {
				return err
			}
			body = struct {
				*catalogfile.Customer
				Metadata json.RawMessage `json:"metadata,omitempty"`
			}{c.Customer, md}
		}
	case catalogfile.KindOverride:
		path = "/v1/customers/" + url.PathEscape(c.Key) + "/overrides/" + url.PathEscape(c.Override.Metric) + "/" + url.PathEscape(c.Override.Window)
		body = c.Override
	}
	if c.Op == catalogfile.Delete {
		return a.do(ctx, http.MethodDelete, path, c.IfMatch, nil, nil)
	}
	return a.do(ctx, http.MethodPut, path, c.IfMatch, body, nil)
}
