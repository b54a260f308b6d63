package keys_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/tiers"
)

// fakeStore keeps keys in memory.
type fakeStore struct {
	mu      sync.Mutex
	keys    map[string]keys.Key
	digests map[string]keys.Digest
	revoked map[string]bool
	touched map[string]time.Time
	// liveHook runs in LiveKeys after the keys are read, before they are
	// returned: to change things while a load reads.
	liveHook  func()
	touchErr  error
	customers map[string]bool
}

var _ keys.Store = (*fakeStore)(nil)

func newFakeStore(customers ...string) *fakeStore {
	s := &fakeStore{keys: map[string]keys.Key{}, digests: map[string]keys.Digest{}, revoked: map[string]bool{},
		touched: map[string]time.Time{}, customers: map[string]bool{}}
	for _, c := range customers {
		s.customers[c] = true
	}
	return s
}

func (s *fakeStore) CreateKey(_ context.Context, w tiers.Write, k keys.Key, d keys.Digest) (keys.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.customers[k.Customer] {
		return keys.Key{}, tiers.ErrCustomerNotFound
	}
	k.CreatedAt = w.At
	s.keys[k.ID], s.digests[k.ID] = k, d
	return k, nil
}

func (s *fakeStore) FindKey(_ context.Context, id string) (keys.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return keys.Key{}, keys.ErrKeyNotFound
	}
	return k, nil
}

func (s *fakeStore) FindKeys(_ context.Context, customer string, f keys.Filter) ([]keys.Key, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []keys.Key
	for id, k := range s.keys {
		if k.Customer == customer && (f.IncludeRevoked || !s.revoked[id]) {
			out = append(out, k)
		}
	}
	return out, false, nil
}

func (s *fakeStore) RevokeKey(_ context.Context, w tiers.Write, id string) (keys.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok || s.revoked[id] {
		return keys.Key{}, keys.ErrKeyNotFound
	}
	s.revoked[id] = true
	revoked := k
	revoked.RevokedAt = &w.At
	s.keys[id] = revoked
	return k, nil
}

func (s *fakeStore) live(id string) keys.Live {
	k := s.keys[id]
	return keys.Live{ID: id, Customer: k.Customer, Digest: s.digests[id], ExpiresAt: k.ExpiresAt, LastUsedAt: k.LastUsedAt}
}

func (s *fakeStore) LiveKeys(_ context.Context, now time.Time) ([]keys.Live, error) {
	s.mu.Lock()
	var out []keys.Live
	for id, k := range s.keys {
		if !s.revoked[id] && (k.ExpiresAt == nil || k.ExpiresAt.After(now)) {
			out = append(out, s.live(id))
		}
	}
	hook := s.liveHook
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return out, nil
}

func (s *fakeStore) LiveKey(_ context.Context, id string) (keys.Live, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[id]; !ok || s.revoked[id] {
		return keys.Live{}, keys.ErrKeyNotFound
	}
	return s.live(id), nil
}

func (s *fakeStore) TouchKeys(_ context.Context, used map[string]time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.touchErr != nil {
		return s.touchErr
	}
	for id, at := range used {
		if at.After(s.touched[id]) {
			s.touched[id] = at
		}
	}
	return nil
}

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var t0 = time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC)

func TestNewSecretAndID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := keys.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, "qk_") || len(s) != 35 || seen[s] {
			t.Fatalf("secret %q: want qk_ and 32 base62 characters, never twice", s)
		}
		for _, c := range s[3:] {
			if !strings.ContainsRune("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", c) {
				t.Fatalf("secret %q: %q is not base62", s, c)
			}
		}
		seen[s] = true
		id, err := keys.NewID()
		if err != nil || !keys.ValidID(id) {
			t.Fatalf("id %q, %v: not valid", id, err)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"key_AAAAAAAAAAAAAAAA", true},
		{"key_AAAAAAAAAAAAAAA", false},
		{"kex_AAAAAAAAAAAAAAAA", false},
		{"key_AAAAAAAAAAAAAAA-", false},
		{"key_" + strings.Repeat("a", 65), false},
		{"", false},
	}
	for _, tt := range tests {
		if got := keys.ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %t, want %t", tt.id, got, tt.want)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	past, future := t0.Add(-time.Second), t0.Add(time.Second)
	tests := []struct {
		name   string
		spec   keys.Spec
		fields []string
	}{
		{name: "empty", spec: keys.Spec{}},
		{name: "name and future expiry", spec: keys.Spec{Name: "ci", ExpiresAt: &future}},
		{name: "expiry now", spec: keys.Spec{ExpiresAt: &t0}, fields: []string{"expires_at"}},
		{name: "expiry past", spec: keys.Spec{ExpiresAt: &past}, fields: []string{"expires_at"}},
		{name: "name too long", spec: keys.Spec{Name: strings.Repeat("é", 101)}, fields: []string{"name"}},
		{name: "name of 100", spec: keys.Spec{Name: strings.Repeat("é", 100)}},
		{name: "control character", spec: keys.Spec{Name: "a\nb"}, fields: []string{"name"}},
		{name: "both", spec: keys.Spec{Name: "\x00", ExpiresAt: &past}, fields: []string{"name", "expires_at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate(t0)
			var got []string
			var ve *tiers.ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
			if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
				t.Errorf("fields = %q, want %q", got, tt.fields)
			}
		})
	}
}

// newVerifier returns a service and verifier over a fake store of the
// customer acme, on a manual clock.
func newVerifier(t *testing.T) (*keys.Service, *keys.Verifier, *fakeStore, *clock) {
	t.Helper()
	c := &clock{t: t0}
	st := newFakeStore("acme", "globex")
	v := keys.NewVerifier(st, c.now)
	return keys.NewService(st, c.now, v), v, st, c
}

func mustCreate(t *testing.T, svc *keys.Service, customer string, spec keys.Spec) keys.Created {
	t.Helper()
	k, err := svc.CreateKey(context.Background(), tiers.Write{Actor: "ops"}, customer, spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerifierResolves(t *testing.T) {
	ctx := context.Background()
	svc, v, _, c := newVerifier(t)
	expires := t0.Add(time.Hour)
	k := mustCreate(t, svc, "acme", keys.Spec{Name: "ci", ExpiresAt: &expires})
	other := mustCreate(t, svc, "globex", keys.Spec{})
	if k.Prefix != k.Secret[:8] || k.Customer != "acme" || !k.CreatedAt.Equal(t0) {
		t.Fatalf("created = %+v", k)
	}
	farOff := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	far := mustCreate(t, svc, "acme", keys.Spec{ExpiresAt: &farOff})
	revoked := mustCreate(t, svc, "acme", keys.Spec{})
	if err := svc.RevokeKey(ctx, tiers.Write{Actor: "ops"}, revoked.ID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		advance time.Duration
		key     string
		want    string
		wantID  string
	}{
		{name: "live key", key: k.Secret, want: "acme", wantID: k.ID},
		{name: "key expiring after 2262", key: far.Secret, want: "acme", wantID: far.ID},
		{name: "other customer's key", key: other.Secret, want: "globex", wantID: other.ID},
		{name: "unknown key", key: "qk_" + strings.Repeat("A", 32)},
		{name: "empty", key: ""},
		{name: "too long", key: k.Secret + strings.Repeat("A", keys.MaxKeyLen)},
		{name: "prefix of a live key", key: k.Secret[:20]},
		{name: "revoked key", key: revoked.Secret},
		{name: "a nanosecond before expiry", advance: time.Hour - time.Nanosecond, key: k.Secret, want: "acme", wantID: k.ID},
		{name: "at expiry", advance: time.Nanosecond, key: k.Secret},
		{name: "key without expiry, later", advance: 1000 * time.Hour, key: other.Secret, want: "globex", wantID: other.ID},
	}
	for _, tt := range tests {
		c.advance(tt.advance)
		got, id, err := v.Customer(ctx, tt.key)
		if tt.want == "" {
			if !errors.Is(err, tiers.ErrInvalidAPIKey) || got != "" || id != "" {
				t.Errorf("%s: Customer = %q, %q, %v; want ErrInvalidAPIKey", tt.name, got, id, err)
			}
			continue
		}
		if err != nil || got != tt.want || id != tt.wantID {
			t.Errorf("%s: Customer = %q, %q, %v; want %q, %q", tt.name, got, id, err, tt.want, tt.wantID)
		}
	}
}

// Resolving a key is on the check path: it allocates nothing.
func TestVerifierResolvesWithoutAllocating(t *testing.T) {
	ctx := context.Background()
	svc, v, _, _ := newVerifier(t)
	k := mustCreate(t, svc, "acme", keys.Spec{})
	if _, _, err := v.Customer(ctx, k.Secret); err != nil { // records the use: the minute's first
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if customer, id, err := v.Customer(ctx, k.Secret); err != nil || customer != "acme" || id != k.ID {
			t.Fatalf("Customer = %q, %q, %v", customer, id, err)
		}
	})
	if allocs != 0 {
		t.Errorf("Customer allocates %v times per call, want 0", allocs)
	}
}

// Unknown, revoked and expired keys get one and the same error.
func TestVerifierErrorsAlike(t *testing.T) {
	ctx := context.Background()
	svc, v, _, c := newVerifier(t)
	expires := t0.Add(time.Minute)
	expiring := mustCreate(t, svc, "acme", keys.Spec{ExpiresAt: &expires})
	revoked := mustCreate(t, svc, "acme", keys.Spec{})
	if err := svc.RevokeKey(ctx, tiers.Write{}, revoked.ID); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Minute)
	_, _, unknown := v.Customer(ctx, "qk_unknown")
	_, _, gone := v.Customer(ctx, revoked.Secret)
	_, _, expired := v.Customer(ctx, expiring.Secret)
	if unknown == nil || unknown.Error() != gone.Error() || gone.Error() != expired.Error() {
		t.Errorf("errors differ: unknown %v, revoked %v, expired %v", unknown, gone, expired)
	}
}

func TestServiceErrors(t *testing.T) {
	ctx := context.Background()
	svc, _, _, _ := newVerifier(t)
	if _, err := svc.CreateKey(ctx, tiers.Write{}, "nobody", keys.Spec{}); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("create for unknown customer: %v", err)
	}
	var ve *tiers.ValidationError
	if _, err := svc.CreateKey(ctx, tiers.Write{}, "bad id!", keys.Spec{}); !errors.As(err, &ve) || ve.Fields[0].Field != "customer" {
		t.Errorf("create for invalid customer id: %v", err)
	}
	past := t0.Add(-time.Hour)
	if _, err := svc.CreateKey(ctx, tiers.Write{}, "acme", keys.Spec{ExpiresAt: &past}); !errors.As(err, &ve) {
		t.Errorf("create expired: %v", err)
	}
	for _, id := range []string{"nope", "key_AAAAAAAAAAAAAAAA"} {
		if _, err := svc.Key(ctx, id); !errors.Is(err, keys.ErrKeyNotFound) {
			t.Errorf("Key(%q): %v", id, err)
		}
		if err := svc.RevokeKey(ctx, tiers.Write{}, id); !errors.Is(err, keys.ErrKeyNotFound) {
			t.Errorf("RevokeKey(%q): %v", id, err)
		}
	}
}

// What another process changed reaches the verifier through Created and
// Revoke; a load in progress neither loses a key added meanwhile nor
// brings back one revoked meanwhile.
func TestVerifierLoadAndNotifications(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: t0}
	st := newFakeStore("acme")
	writer := keys.NewService(st, c.now, nil) // another process
	a := mustCreate(t, writer, "acme", keys.Spec{})
	b := mustCreate(t, writer, "acme", keys.Spec{})
	v := keys.NewVerifier(st, c.now)
	if n, err := v.Load(ctx); err != nil || n != 2 {
		t.Fatalf("Load = %d, %v", n, err)
	}

	// Meanwhile another process creates d (heard as Created) and revokes a.
	var d keys.Created
	st.liveHook = func() {
		d = mustCreate(t, writer, "acme", keys.Spec{})
		if err := v.Created(ctx, d.ID); err != nil {
			t.Error(err)
		}
		if err := writer.RevokeKey(ctx, tiers.Write{}, a.ID); err != nil {
			t.Error(err)
		}
		v.Revoke(a.ID)
	}
	if _, err := v.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st.liveHook = nil
	for _, tt := range []struct {
		key  string
		live bool
	}{{a.Secret, false}, {b.Secret, true}, {d.Secret, true}} {
		_, _, err := v.Customer(ctx, tt.key)
		if (err == nil) != tt.live {
			t.Errorf("key %s: err = %v, want live %t", tt.key[:8], err, tt.live)
		}
	}
	// A creation heard after the key was revoked adds nothing.
	if err := v.Created(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Customer(ctx, a.Secret); !errors.Is(err, tiers.ErrInvalidAPIKey) {
		t.Errorf("revoked key after a late creation notice: %v", err)
	}
	v.ForgetCustomer("acme")
	if _, _, err := v.Customer(ctx, b.Secret); !errors.Is(err, tiers.ErrInvalidAPIKey) || v.Len() != 0 {
		t.Errorf("key of a deleted customer: %v, %d held", err, v.Len())
	}
}

// Last uses are kept to the minute and written in one batch by Flush; a
// failed flush keeps them for the next.
func TestVerifierLastUse(t *testing.T) {
	ctx := context.Background()
	svc, v, st, c := newVerifier(t)
	a := mustCreate(t, svc, "acme", keys.Spec{})
	b := mustCreate(t, svc, "acme", keys.Spec{})
	for range 3 {
		if _, _, err := v.Customer(ctx, a.Secret); err != nil {
			t.Fatal(err)
		}
	}
	st.touchErr = errors.New("down")
	if err := v.Flush(ctx); err == nil {
		t.Fatal("Flush with the store down: no error")
	}
	st.touchErr = nil
	c.advance(2 * time.Minute)
	if _, _, err := v.Customer(ctx, b.Secret); err != nil {
		t.Fatal(err)
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	minute := t0.Truncate(time.Minute)
	want := map[string]time.Time{a.ID: minute, b.ID: minute.Add(2 * time.Minute)}
	if len(st.touched) != 2 || !st.touched[a.ID].Equal(want[a.ID]) || !st.touched[b.ID].Equal(want[b.ID]) {
		t.Errorf("touched = %v, want %v", st.touched, want)
	}
	// Nothing new: nothing written.
	st.touched = map[string]time.Time{}
	if err := v.Flush(ctx); err != nil || len(st.touched) != 0 {
		t.Errorf("second flush wrote %v, %v", st.touched, err)
	}
}

func BenchmarkVerifierCustomer(b *testing.B) {
	ctx := context.Background()
	st := newFakeStore("acme")
	c := &clock{t: t0}
	svc := keys.NewService(st, c.now, nil)
	var secret string
	for i := range 10000 {
		k, err := svc.CreateKey(ctx, tiers.Write{}, "acme", keys.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			secret = k.Secret
		}
	}
	v := keys.NewVerifier(st, time.Now)
	if _, err := v.Load(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := v.Customer(ctx, secret); err != nil {
				b.Fatal(err)
			}
		}
	})
}
