// Package keys issues and verifies the API keys quotad gives customers: a
// random secret shown once, stored as its SHA-256, resolved to its customer
// from memory on the check path. It imports only the standard library and
// tiers.
package keys

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// ErrKeyNotFound: no key has the id (or, to revoke one, no live key: it
// is unknown or revoked already).
var ErrKeyNotFound = errors.New("api key not found")

// Shapes of keys and their ids.
const (
	// SecretPrefix starts every key, so that a leaked one is recognised.
	SecretPrefix = "qk_"
	// secretChars base62 characters follow the prefix: 32 of them carry
	// 32·log2(62) ≈ 190 random bits.
	secretChars = 32
	// IDPrefix starts every key id.
	IDPrefix = "key_"
	idChars  = 16
	// PrefixLen is how many of a key's first characters are kept and
	// shown, to recognise it.
	PrefixLen = 8
	// MaxNameLen bounds a key's name, in characters.
	MaxNameLen = 100
	// MaxKeyLen is the longest key Verifier.Customer hashes; longer input
	// is no key quotad issued.
	MaxKeyLen = 256
)

// NewSecret returns a fresh key: "qk_" and 32 base62 characters.
func NewSecret() (string, error) {
	s, err := tiers.RandomBase62(secretChars)
	if err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return SecretPrefix + s, nil
}

// NewID returns a fresh key id: "key_" and 16 base62 characters.
func NewID() (string, error) { return tiers.NewRandomID(IDPrefix, idChars, "api key") }

// ValidID reports whether s has the shape of a key id.
func ValidID(s string) bool { return tiers.ValidRandomID(s, IDPrefix, idChars) }

// Digest is the SHA-256 of a key: what quotad stores and looks keys up by.
type Digest [sha256.Size]byte

// DigestOf returns key's digest.
func DigestOf(key string) Digest { return sha256.Sum256([]byte(key)) }

// Key is an API key as the admin API shows it: never the secret.
type Key struct {
	ID         string     `json:"id"`
	Customer   string     `json:"customer"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is when the key was revoked; nil while it is not.
	RevokedAt *time.Time `json:"revoked_at"`
}

// Filter selects a customer's keys, one page at a time.
type Filter struct {
	tiers.Page
	// IncludeRevoked lists revoked keys too; else only those not revoked
	// (expired ones included).
	IncludeRevoked bool
}

// Live is a key as the verifier holds it: its digest, id, customer and
// expiry.
type Live struct {
	ID         string
	Customer   string
	Digest     Digest
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
}

// Spec is the body of POST /v1/customers/{id}/keys. Both fields are
// optional.
type Spec struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at" nullable:"true"`
}

// Validate checks spec at now. Errors are *tiers.ValidationError.
func (s Spec) Validate(now time.Time) error {
	var fields []tiers.FieldError
	add := func(field, msg string) { fields = append(fields, tiers.FieldError{Field: field, Message: msg}) }
	if msg := tiers.CheckText(s.Name, MaxNameLen); msg != "" {
		add("name", msg)
	}
	if s.ExpiresAt != nil && !s.ExpiresAt.After(now) {
		add("expires_at", "must be in the future")
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// Created is the answer to a key's creation: the one that shows the key.
type Created struct {
	Key
	Secret string `json:"key"`
}

// Store keeps API keys. CreateKey and RevokeKey each run in one
// transaction that records an audit event without the secret and
// notifies the other processes. Errors: ErrKeyNotFound,
// tiers.ErrCustomerNotFound, tiers.ErrUnavailable. Implementations are
// safe for concurrent use.
type Store interface {
	// CreateKey stores k with the digest of its secret.
	CreateKey(ctx context.Context, w tiers.Write, k Key, digest Digest) (Key, error)
	// FindKey returns the key id, revoked or not.
	FindKey(ctx context.Context, id string) (Key, error)
	// FindKeys returns one page of the customer's keys the filter
	// selects, by id; tiers.ErrCustomerNotFound for an unknown customer.
	FindKeys(ctx context.Context, customer string, f Filter) ([]Key, bool, error)
	// RevokeKey revokes the live key id and returns it.
	RevokeKey(ctx context.Context, w tiers.Write, id string) (Key, error)
	// LiveKeys returns every key neither revoked nor expired at now.
	LiveKeys(ctx context.Context, now time.Time) ([]Live, error)
	// LiveKey returns the key id unless it is revoked (ErrKeyNotFound).
	LiveKey(ctx context.Context, id string) (Live, error)
	// TouchKeys sets the last use of each key id, never moving one back.
	TouchKeys(ctx context.Context, used map[string]time.Time) error
}

// Service is the admin side of API keys: validation, generation, the time
// of writes. Changes it commits reach the verifier (if any) before it
// returns.
type Service struct {
	store    Store
	now      func() time.Time
	verifier *Verifier
}

// NewService returns a Service over store; now stamps writes and judges
// expiry. verifier, if not nil, learns of every key created or revoked
// through the Service before the call returns.
func NewService(store Store, now func() time.Time, verifier *Verifier) *Service {
	return &Service{store: store, now: now, verifier: verifier}
}

// CreateKey issues a key to customer.
func (s *Service) CreateKey(ctx context.Context, w tiers.Write, customer string, spec Spec) (Created, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return Created{}, err
	}
	w.At = tiers.Instant(s.now())
	if err := spec.Validate(w.At); err != nil {
		return Created{}, err
	}
	secret, err := NewSecret()
	if err != nil {
		return Created{}, err
	}
	id, err := NewID()
	if err != nil {
		return Created{}, err
	}
	k := Key{ID: id, Customer: customer, Name: spec.Name, Prefix: secret[:PrefixLen], CreatedAt: w.At}
	if spec.ExpiresAt != nil {
		t := tiers.Instant(*spec.ExpiresAt)
		k.ExpiresAt = &t
	}
	d := DigestOf(secret)
	saved, err := s.store.CreateKey(ctx, w, k, d)
	if err != nil {
		return Created{}, err
	}
	if s.verifier != nil {
		s.verifier.Add(Live{ID: saved.ID, Customer: saved.Customer, Digest: d, ExpiresAt: saved.ExpiresAt})
	}
	return Created{Key: saved, Secret: secret}, nil
}

// Key returns the key id, revoked or not.
func (s *Service) Key(ctx context.Context, id string) (Key, error) {
	if !ValidID(id) {
		return Key{}, ErrKeyNotFound
	}
	return s.store.FindKey(ctx, id)
}

// Keys lists a customer's keys by id, one page at a time: those not
// revoked, or every one with f.IncludeRevoked.
func (s *Service) Keys(ctx context.Context, customer string, f Filter) ([]Key, bool, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return nil, false, err
	}
	return s.store.FindKeys(ctx, customer, f)
}

// RevokeKey revokes the key id (ErrKeyNotFound if it is revoked
// already). When it returns, this process's verifier
// no longer accepts the key; other processes stop when they hear of it.
func (s *Service) RevokeKey(ctx context.Context, w tiers.Write, id string) error {
	if !ValidID(id) {
		return ErrKeyNotFound
	}
	w.At = tiers.Instant(s.now())
	if _, err := s.store.RevokeKey(ctx, w, id); err != nil {
		return err
	}
	if s.verifier != nil {
		s.verifier.Revoke(id)
	}
	return nil
}
