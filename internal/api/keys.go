package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Keys is the admin side of API keys. *keys.Service implements it; its
// errors are keys.ErrKeyNotFound, tiers' sentinels and
// *tiers.ValidationError.
type Keys interface {
	CreateKey(ctx context.Context, w tiers.Write, customer string, spec keys.Spec) (keys.Created, error)
	Key(ctx context.Context, id string) (keys.Key, error)
	Keys(ctx context.Context, customer string, f keys.Filter) ([]keys.Key, bool, error)
	RevokeKey(ctx context.Context, w tiers.Write, id string) error
}

var _ Keys = (*keys.Service)(nil)

// KeyResolver resolves an API key to its customer and the key's id, from
// memory. Unknown, revoked and expired keys return an error wrapping
// tiers.ErrInvalidAPIKey. *keys.Verifier implements it.
type KeyResolver interface {
	Customer(ctx context.Context, key string) (customer, id string, err error)
}

var _ KeyResolver = (*keys.Verifier)(nil)

// codeKeyNotFound: no API key has the id (to revoke: no live one).
const codeKeyNotFound = "key_not_found"

// keyHandlers serve the API keys' routes; without keys they answer 404
// key_not_found.
type keyHandlers struct {
	keys Keys
}

func (kh *keyHandlers) keyService() (Keys, error) {
	if kh.keys == nil {
		return nil, keys.ErrKeyNotFound
	}
	return kh.keys, nil
}

func (kh *keyHandlers) createKey(c echo.Context) error {
	var spec keys.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	svc, err := kh.keyService()
	if err != nil {
		return err
	}
	customer := param(c, "customer")
	k, err := svc.CreateKey(c.Request().Context(), writeOf(c), customer, spec)
	if err != nil {
		return aboutCustomer(customer, err)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, "/v1/keys/"+k.ID)
	// The only answer that shows the key: no cache keeps it.
	h.Set("Cache-Control", "no-store")
	return respond(c, http.StatusCreated, k)
}

func (kh *keyHandlers) listKeys(c echo.Context) error {
	p, err := page(c, keys.ValidID)
	if err != nil {
		return err
	}
	revoked, err := boolQuery(c, "include_revoked")
	if err != nil {
		return err
	}
	svc, err := kh.keyService()
	if err != nil {
		return err
	}
	customer := param(c, "customer")
	items, more, err := svc.Keys(c.Request().Context(), customer, keys.Filter{Page: p, IncludeRevoked: revoked})
	if err != nil {
		return aboutCustomer(customer, err)
	}
	if items == nil {
		items = []keys.Key{}
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].ID
	}
	return respond(c, http.StatusOK, list("keys", items, nextCursor(more, last)))
}

func (kh *keyHandlers) getKey(c echo.Context) error {
	svc, err := kh.keyService()
	if err != nil {
		return err
	}
	k, err := svc.Key(c.Request().Context(), param(c, "key"))
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, k)
}

func (kh *keyHandlers) revokeKey(c echo.Context) error {
	svc, err := kh.keyService()
	if err != nil {
		return err
	}
	if err := svc.RevokeKey(c.Request().Context(), writeOf(c), param(c, "key")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// identifier resolves the API keys calls name instead of their customer:
// checks', refunds', reserves' and feature checks'.
type identifier struct {
	resolver KeyResolver
}

// identify fills in the customer of a check or refund made by API key,
// the key's id (KeyID), and that id as its subject where it names none (each item's, for
// a check of items): limits per subject count each key apart. Exactly one
// of customer and api_key may be given (a 400 otherwise; none at all is
// left to the check, which requires the customer).
func (ids identifier) identify(ctx context.Context, r *call) error {
	if r.APIKey == "" {
		return nil
	}
	if r.Customer != "" {
		return tiers.Invalid("api_key", "give either customer or api_key, not both")
	}
	customer, id, err := ids.customerOfKey(ctx, r.APIKey)
	if err != nil {
		return err
	}
	r.Customer, r.KeyID = customer, id
	if r.Items == nil && r.Subject == "" {
		r.Subject = id
	}
	for i := range r.Items {
		if r.Items[i].Subject == "" {
			r.Items[i].Subject = id
		}
	}
	return nil
}

// customerOfKey resolves an API key to its customer and the key's id,
// from memory: an error wrapping tiers.ErrInvalidAPIKey when no live key
// has this value. Every route that takes an api_key resolves it here, so
// that one longer than the API declares (maxLength) is the same 400 on
// each, not a 403: it is bad input, not a key that is unknown.
func (ids identifier) customerOfKey(ctx context.Context, key string) (customer, id string, err error) {
	if n := utf8.RuneCountInString(key); n == 0 || n > keys.MaxKeyLen {
		return "", "", tiers.Invalid("api_key", fmt.Sprintf("must be 1 to %d characters", keys.MaxKeyLen))
	}
	if ids.resolver == nil {
		return "", "", tiers.ErrInvalidAPIKey
	}
	return ids.resolver.Customer(ctx, key)
}

// byKey turns the check's error about a customer that a key resolved to
// but is gone (deleted since) into the key's refusal: the same answer as
// for an unknown, revoked or expired key. An item's error names the
// item's field (see aboutItem).
func byKey(r *call, err error) error {
	return aboutCaller(r.APIKey != "", r.Customer, aboutItem(r, err))
}

// aboutItem names the field an item's error is about (a
// *quota.ItemError: its Index is the item's): the subject a metric with
// limits per subject requires ("subject", or "items[i].subject" in a
// check of items), and the metric of an item that is not declared
// ("items[i].metric"; a check of one metric says no more than before).
func aboutItem(r *call, err error) error {
	if err == nil {
		return nil
	}
	var ie *quota.ItemError
	if !errors.As(err, &ie) {
		return err
	}
	prefix := ""
	metric := r.Metric
	if r.Items != nil && ie.Index >= 0 && ie.Index < len(r.Items) {
		prefix = "items[" + strconv.Itoa(ie.Index) + "]."
		metric = r.Items[ie.Index].Metric
	}
	switch {
	case errors.Is(err, tiers.ErrSubjectRequired):
		return &fieldCause{field: prefix + "subject", value: metric, err: err}
	case errors.Is(err, tiers.ErrMetricNotFound) && prefix != "":
		return &fieldCause{field: prefix + "metric", value: metric, err: err}
	}
	return err
}

// aboutCaller is byKey for a request that named its customer (byKey
// false) or gave an API key that resolved to customer (byKey true).
func aboutCaller(byKey bool, customer string, err error) error {
	if byKey && errors.Is(err, tiers.ErrCustomerNotFound) {
		return tiers.ErrInvalidAPIKey
	}
	return aboutCustomer(customer, err)
}

// aboutMetric is aboutItem for a request of one metric.
func aboutMetric(metric string, err error) error {
	return aboutItem(&call{Metric: metric}, err)
}
