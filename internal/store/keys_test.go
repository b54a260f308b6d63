package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// mustCustomers creates a plan and the customers ids on it.
func mustCustomers(t testing.TB, db *store.DB, ids ...string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: id, Plan: "p", Metadata: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// mustCreateKey creates a key of customer and returns it and its secret.
func mustCreateKey(t testing.TB, db *store.DB, customer, id string, expires *time.Time) (keys.Key, string) {
	t.Helper()
	secret, err := keys.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	k, err := db.Keys.CreateKey(context.Background(), write("ops"), keys.Key{ID: id, Customer: customer, Name: "ci",
		Prefix: secret[:keys.PrefixLen], ExpiresAt: expires}, keys.DigestOf(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustCustomers(t, db, "acme", "globex")

	later := t0.Add(time.Hour)
	k, secret := mustCreateKey(t, db, "acme", "key_AAAAAAAAAAAAAAAA", &later)
	if k.ID != "key_AAAAAAAAAAAAAAAA" || k.Customer != "acme" || k.Name != "ci" || k.Prefix != secret[:8] ||
		!k.CreatedAt.Equal(t0) || k.ExpiresAt == nil || !k.ExpiresAt.Equal(later) || k.LastUsedAt != nil {
		t.Fatalf("created = %+v", k)
	}
	if _, err := db.Keys.CreateKey(ctx, write("ops"), keys.Key{ID: "key_BBBBBBBBBBBBBBBB", Customer: "nobody", Prefix: "qk_12345"},
		keys.DigestOf("qk_x")); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("create for unknown customer: err = %v, want ErrCustomerNotFound", err)
	}
	got, err := db.Keys.FindKey(ctx, k.ID)
	if err != nil || got != (keys.Key{ID: k.ID, Customer: "acme", Name: "ci", Prefix: k.Prefix, CreatedAt: t0, ExpiresAt: got.ExpiresAt}) ||
		!got.ExpiresAt.Equal(later) {
		t.Errorf("find = %+v, %v", got, err)
	}

	live, err := db.Keys.LiveKeys(ctx, t0)
	if err != nil || len(live) != 1 || live[0].ID != k.ID || live[0].Customer != "acme" || live[0].Digest != keys.DigestOf(secret) {
		t.Fatalf("live keys = %+v, %v", live, err)
	}
	if live, err := db.Keys.LiveKeys(ctx, later); err != nil || len(live) != 0 {
		t.Errorf("live keys once expired = %+v, %v", live, err)
	}
	if one, err := db.Keys.LiveKey(ctx, k.ID); err != nil || one.Digest != keys.DigestOf(secret) {
		t.Errorf("live key = %+v, %v", one, err)
	}

	// Last use: set in a batch, never moved back, unknown ids skipped.
	used := t0.Add(2 * time.Minute)
	if err := db.Keys.TouchKeys(ctx, map[string]time.Time{k.ID: used, "key_CCCCCCCCCCCCCCCC": used}); err != nil {
		t.Fatal(err)
	}
	if err := db.Keys.TouchKeys(ctx, map[string]time.Time{k.ID: t0}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Keys.FindKey(ctx, k.ID); err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(used) {
		t.Errorf("last used = %+v, %v; want %v", got.LastUsedAt, err, used)
	}

	revokedAt := t0.Add(3 * time.Minute)
	if _, err := db.Keys.RevokeKey(ctx, tiers.Write{Actor: "ops", At: revokedAt}, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Keys.RevokeKey(ctx, write("ops"), k.ID); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("revoke twice: err = %v, want ErrKeyNotFound", err)
	}
	// A revoked key is still found, with when it was revoked.
	if got, err := db.Keys.FindKey(ctx, k.ID); err != nil || got.ID != k.ID || got.RevokedAt == nil || !got.RevokedAt.Equal(revokedAt) {
		t.Errorf("find revoked = %+v, %v; want revoked at %v", got, err, revokedAt)
	}
	if _, err := db.Keys.LiveKey(ctx, k.ID); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("live key revoked: err = %v", err)
	}
	if live, err := db.Keys.LiveKeys(ctx, t0); err != nil || len(live) != 0 {
		t.Errorf("live keys after revoke = %+v, %v", live, err)
	}

	// The audit log has the creation and the revocation, never the secret
	// nor its digest.
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 10, Customer: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action+" "+e.Resource)
		for _, image := range []string{string(e.Before), string(e.After)} {
			if strings.Contains(image, secret) || strings.Contains(image, secret[8:]) {
				t.Errorf("audit event %s %s holds the key: %s", e.Action, e.Resource, image)
			}
		}
	}
	want := "delete keys/" + k.ID + ",create keys/" + k.ID
	if got := strings.Join(actions[:2], ","); got != want {
		t.Errorf("audit = %q, want %q first", actions, want)
	}
}

func TestFindKeysPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustCustomers(t, db, "acme", "globex", "empty")
	ids := []string{"key_AAAAAAAAAAAAAAA1", "key_AAAAAAAAAAAAAAA2", "key_AAAAAAAAAAAAAAA3"}
	for _, id := range ids {
		mustCreateKey(t, db, "acme", id, nil)
	}
	mustCreateKey(t, db, "globex", "key_GGGGGGGGGGGGGGGG", nil)
	if _, err := db.Keys.RevokeKey(ctx, write("ops"), ids[1]); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		customer string
		page     tiers.Page
		revoked  bool
		want     []string
		more     bool
		err      error
	}{
		{name: "first page", customer: "acme", page: tiers.Page{Limit: 1}, want: ids[:1], more: true},
		{name: "after the first, revoked left out", customer: "acme", page: tiers.Page{Limit: 1, After: ids[0]}, want: ids[2:]},
		{name: "all", customer: "acme", page: tiers.Page{Limit: 10}, want: []string{ids[0], ids[2]}},
		{name: "revoked included", customer: "acme", page: tiers.Page{Limit: 10}, revoked: true, want: ids},
		{name: "revoked included, a page", customer: "acme", page: tiers.Page{Limit: 1, After: ids[0]}, revoked: true, want: ids[1:2], more: true},
		{name: "other customer", customer: "globex", page: tiers.Page{Limit: 10}, want: []string{"key_GGGGGGGGGGGGGGGG"}},
		{name: "customer without keys", customer: "empty", page: tiers.Page{Limit: 10}},
		{name: "unknown customer", customer: "nobody", page: tiers.Page{Limit: 10}, err: tiers.ErrCustomerNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, more, err := db.Keys.FindKeys(ctx, tt.customer, keys.Filter{Page: tt.page, IncludeRevoked: tt.revoked})
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			var got []string
			for _, k := range list {
				got = append(got, k.ID)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || more != tt.more {
				t.Errorf("got %q, more %t; want %q, more %t", got, more, tt.want, tt.more)
			}
		})
	}
}

// A deleted customer's keys go with it.
func TestKeysOfDeletedCustomer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustCustomers(t, db, "acme")
	k, _ := mustCreateKey(t, db, "acme", "key_AAAAAAAAAAAAAAAA", nil)
	if err := db.Catalog.DeleteCustomer(ctx, write("ops"), "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Keys.FindKey(ctx, k.ID); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("find key of deleted customer: err = %v", err)
	}
	if live, err := db.Keys.LiveKeys(ctx, t0); err != nil || len(live) != 0 {
		t.Errorf("live keys = %+v, %v", live, err)
	}
}
