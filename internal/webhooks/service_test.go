package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// putStore is a Store that keeps the webhooks put.
type putStore struct{ put []Webhook }

func (s *putStore) FindWebhook(context.Context, string) (Webhook, error) {
	return Webhook{}, ErrWebhookNotFound
}

func (s *putStore) FindWebhooks(context.Context, tiers.Page) ([]Webhook, bool, error) {
	return s.put, false, nil
}

func (s *putStore) PutWebhook(_ context.Context, _ tiers.Write, wh Webhook, _ bool) (Webhook, bool, error) {
	s.put = append(s.put, wh)
	return wh, true, nil
}

func (s *putStore) DeleteWebhook(context.Context, tiers.Write, string) error { return nil }

func (s *putStore) FindDeliveries(context.Context, DeliveryFilter) ([]Delivery, bool, error) {
	return nil, false, nil
}

// A URL whose host is a private, loopback, link-local or otherwise not
// public address (see TestRefused), written
// as an address, is refused when the webhook is put (400 on url), unless
// private addresses are allowed: every delivery to it would be refused. A
// host name is accepted: it is checked when a delivery connects.
func TestPutWebhookRefusesPrivateAddresses(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		url     string
		refused bool
	}{
		{"http://127.0.0.1:9/hook", true},
		{"http://10.0.0.1/", true},
		{"https://192.168.1.20/hooks", true},
		{"http://169.254.169.254/latest/meta-data", true},
		{"http://[::1]/", true},
		{"http://[fe80::1]:8080/", true},
		{"http://[::ffff:10.0.0.1]/", true},
		{"http://100.64.0.1/", true},
		{"http://0.0.0.0/", true},
		{"http://198.18.0.1/", true},
		{"http://[64:ff9b::a9fe:a9fe]/", true}, // NAT64 of 169.254.169.254
		{"http://[2002:a00:1::1]/", true},      // 6to4 of 10.0.0.1
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", true},
		{"https://[64:ff9b::5db8:d822]/hook", false}, // NAT64 of 93.184.216.34
		{"https://93.184.216.34/hook", false},
		{"https://[2606:2800:220:1::1]/hook", false},
		{"https://hooks.example.com/quotad", false},
		{"http://localhost:9000/", false}, // a name: refused when it connects
	} {
		for _, allow := range []bool{false, true} {
			store := &putStore{}
			s := NewService(store, now, allow)
			_, _, err := s.PutWebhook(context.Background(), tiers.Write{}, "billing", Spec{URL: c.url})
			var ve *tiers.ValidationError
			switch wantRefused := c.refused && !allow; {
			case wantRefused && (!errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "url" ||
				!strings.Contains(ve.Fields[0].Message, "QUOTAD_WEBHOOK_ALLOW_PRIVATE")):
				t.Errorf("%s (private allowed: %t): %v, want a validation error on url naming the setting", c.url, allow, err)
			case wantRefused && len(store.put) != 0:
				t.Errorf("%s (private allowed: %t): refused, yet stored", c.url, allow)
			case !wantRefused && (err != nil || len(store.put) != 1):
				t.Errorf("%s (private allowed: %t): %v, %d stored; want it stored", c.url, allow, err, len(store.put))
			}
		}
	}
}
