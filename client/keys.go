package quotad

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// KeySpec is the body of KeysService.Create. Both fields are optional.
type KeySpec struct {
	// Name recognises the key: at most 100 characters.
	Name string `json:"name,omitempty"`
	// ExpiresAt, in the future, is when the key stops being accepted; nil:
	// never.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Key is an API key quotad issued to a customer.
type Key struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Name     string `json:"name"`
	// Key is the key itself: set only in KeysService.Create's answer, never again.
	Key string `json:"key,omitempty"`
	// Prefix is the key's first 8 characters, to recognise it.
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is when the key was revoked; nil while it is not.
	RevokedAt *time.Time `json:"revoked_at"`
}

// KeysService issues and revokes customers' API keys.
type KeysService service

// Create issues an API key to a customer. The answer's Key is the only
// time the key is shown. ErrCustomerNotFound if no customer has the id.
// It is sent once: a retry would issue a second key.
func (s *KeysService) Create(ctx context.Context, customer string, spec KeySpec) (*Key, error) {
	var k Key
	if _, err := s.client.do(ctx, call{method: http.MethodPost, path: pathf("/v1/customers/%s/keys", customer), body: spec,
		ok: []int{http.StatusCreated}, out: &k}); err != nil {
		return nil, err
	}
	return &k, nil
}

// List lists a customer's API keys that are not revoked (expired ones
// included), by id, without the keys.
func (s *KeysService) List(ctx context.Context, customer string) iter.Seq2[Key, error] {
	return s.list(ctx, customer, false)
}

// ListIncludingRevoked lists every API key of a customer, revoked ones
// too (their RevokedAt set), by id, without the keys.
func (s *KeysService) ListIncludingRevoked(ctx context.Context, customer string) iter.Seq2[Key, error] {
	return s.list(ctx, customer, true)
}

func (s *KeysService) list(ctx context.Context, customer string, revoked bool) iter.Seq2[Key, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Key], error) {
		var out struct {
			Keys       []Key  `json:"keys"`
			NextCursor string `json:"next_cursor"`
		}
		q := listQuery(cursor, 0)
		if revoked {
			q.Set("include_revoked", "true")
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/keys", customer),
			query: q, retry: true, out: &out})
		return page[Key]{out.Keys, out.NextCursor}, err
	})
}

// Get gets an API key by id (without the key), revoked or not (see
// RevokedAt); ErrKeyNotFound if no key has the id.
func (s *KeysService) Get(ctx context.Context, id string) (*Key, error) {
	var k Key
	if err := s.client.get(ctx, pathf("/v1/keys/%s", id), &k, nil); err != nil {
		return nil, err
	}
	return &k, nil
}

// Revoke revokes an API key: every quotad process refuses it from then
// on. ErrKeyNotFound if no live key has the id.
func (s *KeysService) Revoke(ctx context.Context, id string) error {
	return s.client.del(ctx, pathf("/v1/keys/%s", id), nil)
}
